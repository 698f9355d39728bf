// job: a launch line read as Megatron-LM's argparse parser reads it (d98e8a64's
// argument list, allow_abbrev=False): every nargs form, --name=value, flags,
// types and choices, and unknown arguments named with the closest known one.
// The expected refusals are argparse's own (Python 3.12 argparse.py:
// _match_argument, _get_values, _check_value).
#include <doctest/doctest.h>

#include "job/arg_map.hpp"
#include "job/argument_table.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using namespace paramlayout::job;
using paramlayout::test::expect_ok;
using Args = std::vector<std::string>;

namespace {

std::string parse_error(const Args &args) {
  Result<ArgMap> map = ArgMap::parse(args);
  REQUIRE_FALSE(map);
  return map.error().message;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_SUITE("job-arguments") {
  TEST_CASE(
      "the table is Megatron-LM's parser: hundreds of arguments, each "
      "name once") {
    CHECK(megatron_arguments().size() > 500);
    std::size_t names = 0;
    for (const ArgumentInfo &a : megatron_arguments()) {
      for (std::string_view name : a.names()) {
        ++names;
        CHECK(find_argument(name) == &a);
      }
    }
    CHECK(names >= megatron_arguments().size());
    // Arguments generated from TransformerConfig by ArgumentGroupFactory
    // (argument_utils.py) are there with the names and actions it gives them.
    REQUIRE(find_argument("--num-layers") != nullptr);
    CHECK(find_argument("--num-layers")->type == "int");
    REQUIRE(find_argument("--spec") != nullptr);
    CHECK(find_argument("--spec")->nargs == "*");
    REQUIRE(find_argument("--fp8-recipe") != nullptr);
    CHECK(find_argument("--use-distributed-optimizer")->action() == ArgAction::store_true);
    CHECK(find_argument("--DDP-impl") == nullptr);  // removed from Megatron-LM
  }

  TEST_CASE("unknown arguments are refused, each named with the closest known name") {
    const std::string e =
        parse_error({"--tensor-model-paralel-size", "8", "--DDP-impl", "local", "--bf16"});
    CHECK(contains(e,
                   "--tensor-model-paralel-size (did you mean "
                   "--tensor-model-parallel-size?)"));
    CHECK(contains(e, "--DDP-impl"));
    // Its values are not arguments either: argparse reports them among the
    // unrecognized.
    CHECK(contains(e, "'8'"));
    // allow_abbrev=False: a prefix of a known name is not that name.
    CHECK(contains(parse_error({"--tensor-model-parallel", "2"}), "did you mean"));
    CHECK(contains(parse_error({"stray"}), "'stray' (a value no argument takes)"));
    CHECK(contains(parse_error({"--bf16", "yes"}),
                   "'yes' (a value no argument takes: --bf16 "
                   "takes none)"));
  }

  TEST_CASE("every nargs form reads as argparse reads it") {
    // nargs='*': --spec MODULE NAME.
    ArgMap map = expect_ok(ArgMap::parse({"--spec", "m.n", "spec_name", "--bf16"}));
    CHECK(map.values("--spec") == Args{"m.n", "spec_name"});
    CHECK(map.flag("--bf16"));
    // nargs='*' takes none too; a flag after it ends its values.
    map = expect_ok(ArgMap::parse({"--data-path", "--bf16"}));
    CHECK(map.values("--data-path") == Args{});
    map = expect_ok(ArgMap::parse({"--data-path", "a", "b", "c", "--bf16"}));
    CHECK(map.values("--data-path") == Args{"a", "b", "c"});
    // nargs='+' needs at least one value, each of its type.
    CHECK(contains(parse_error({"--recompute-modules"}), "expected at least one argument"));
    CHECK(contains(parse_error({"--mrope-section", "16", "x"}), "invalid int value: 'x'"));
    // nargs=3: exactly three, and no more.
    CHECK(contains(parse_error({"--rampup-batch-size", "16", "16"}), "expected 3 arguments"));
    map = expect_ok(ArgMap::parse({"--rampup-batch-size", "16", "16", "1000"}));
    CHECK(map.values("--rampup-batch-size") == Args{"16", "16", "1000"});
    CHECK(contains(parse_error({"--rampup-batch-size", "1", "2", "3", "4"}), "'4'"));
    CHECK(contains(parse_error({"--rampup-batch-size=1"}), "expected 3 arguments"));
    // nargs=None: exactly one; a missing value is refused, a negative number is
    // a value.
    CHECK(contains(parse_error({"--num-layers"}), "expected one argument"));
    CHECK(contains(parse_error({"--num-layers", "--bf16"}), "expected one argument"));
    map = expect_ok(ArgMap::parse({"--seed", "-3"}));
    CHECK(map.string("--seed") == "-3");
    // --name=value, and the last occurrence wins.
    map = expect_ok(ArgMap::parse({"--num-layers=4", "--num-layers", "6"}));
    CHECK(map.integer("--num-layers", 0, 1) == 6);
    // --name=value takes one value only: what follows is not its.
    CHECK(contains(parse_error({"--data-path=a", "b"}), "'b'"));
    // A flag given a value with '=' is refused as argparse refuses it.
    CHECK(contains(parse_error({"--bf16=yes"}), "ignored explicit argument 'yes'"));
  }

  TEST_CASE("types and choices: argparse's int(), float() and choices") {
    // int() takes spaces, a sign, underscores between digits and leading zeros.
    ArgMap map = expect_ok(ArgMap::parse({"--num-layers", " +0_32 "}));
    CHECK(map.integer("--num-layers", 0, 1) == 32);
    CHECK(contains(parse_error({"--num-layers", "two"}), "invalid int value: 'two'"));
    CHECK(contains(parse_error({"--num-layers", "3.0"}), "invalid int value: '3.0'"));
    CHECK(contains(parse_error({"--num-layers", "1__0"}), "invalid int value"));
    expect_ok(ArgMap::parse({"--lr", "1e-4", "--min-lr", ".5", "--clip-grad", "inf"}));
    CHECK(contains(parse_error({"--lr", "fast"}), "invalid float value: 'fast'"));
    CHECK(contains(parse_error({"--lr", "0x10"}), "invalid float value"));
    CHECK(contains(parse_error({"--optimizer", "adamw"}), "invalid choice: 'adamw' (choose from "));
    CHECK(contains(parse_error({"--exp-avg-dtype", "int8"}), "invalid choice: 'int8'"));
    expect_ok(ArgMap::parse({"--exp-avg-dtype", "bf16", "--fp8-recipe", "mxfp8"}));
  }

  TEST_CASE("the closest name is the fewest edits away") {
    CHECK(closest_argument("--hiden-size") == "--hidden-size");
    CHECK(closest_argument("--use-distributed-optimiser") == "--use-distributed-optimizer");
  }
}
