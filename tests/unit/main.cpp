// The unit tests' main: doctest's, except that a run in which no test case passes the
// filters fails. A misspelt or renamed --test-suite would otherwise run nothing and pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

/// Counts the test cases that run.
struct RunCounter : doctest::IReporter {
  static inline bool started = false;
  static inline unsigned cases = 0;

  explicit RunCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override { started = true; }
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("run-counter", 1, RunCounter);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || !RunCounter::started) return result;  // --help, --list-*, --count
  if (RunCounter::cases == 0) {
    std::fflush(stdout);  // after doctest's summary
    std::fprintf(stderr,
                 "no test case passes the filters: check the --test-suite and "
                 "--test-case names\n");
    return 1;
  }
  return result;
}
