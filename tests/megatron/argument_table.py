"""Megatron-LM's argument list, taken from the parser Megatron-LM itself builds, written as the
C++ table paramlayout reads launch lines with (src/core/job/megatron_arguments.inc).

    PY=$(tools/megatron-env.sh | tail -n 1)
    $PY tests/megatron/argument_table.py --write src/core/job/megatron_arguments.inc
    $PY tests/megatron/argument_table.py --check src/core/job/megatron_arguments.inc

The parser is the one `megatron.training.arguments.parse_args()` builds (with every group
`add_megatron_arguments` adds, including those generated from the config dataclasses by
`argument_utils.ArgumentGroupFactory`), captured at the moment parse_args hands it the command
line: nothing is re-derived from the source text. pretrain_gpt.py adds ModelOpt's arguments only
when nvidia-modelopt is installed (pretrain_gpt.py:526): the table holds them too, marked,
as a full installation parses them.

--check exits 0 when the checked-in table equals the regenerated one, 1 (with a diff) when it
differs, 77 when Megatron-LM cannot be imported here (the test skips).
"""
import argparse
import difflib
import enum
import os
import subprocess
import sys
from pathlib import Path

SKIP = 77


class _Captured(Exception):
    pass


def megatron_parser():
    """The ArgumentParser megatron.training.arguments.parse_args builds."""
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        captured["parser"] = self
        raise _Captured()

    argparse.ArgumentParser.parse_args = capture
    try:
        from megatron.post_training.arguments import add_modelopt_args
        from megatron.training.arguments import parse_args
        try:
            parse_args(extra_args_provider=add_modelopt_args)
        except _Captured:
            pass
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


ACTIONS = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse.BooleanOptionalAction: "boolean_optional",
}


def type_of(action):
    """int, float, str, bool, enum (the values are the members' names), or the name of the
    function argparse calls on each value (read as text by paramlayout)."""
    t = action.type
    if t is None or t is str:
        return "str"
    if t in (int, float, bool):
        return t.__name__
    if action.choices and all(isinstance(c, enum.Enum) for c in action.choices):
        return "enum"
    return "call:" + getattr(t, "__qualname__", getattr(t, "__name__", repr(t)))


def choice_text(choice):
    return choice.name if isinstance(choice, enum.Enum) else str(choice)


def default_text(action):
    d = action.default
    if isinstance(d, enum.Enum):
        return d.name
    if d is None or d is argparse.SUPPRESS:
        return "None"
    if callable(d) and not isinstance(d, (int, float, str, list, tuple)):
        return getattr(d, "__name__", repr(d))
    return repr(d)


def cxx_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def rows(parser):
    modelopt = {id(a) for g in parser._action_groups if g.title and g.title.startswith("modelopt")
                for a in g._group_actions}
    groups = {}
    for i, group in enumerate(parser._mutually_exclusive_groups):
        for a in group._group_actions:
            groups[id(a)] = i + 1
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        kind = ACTIONS.get(type(action))
        if kind is None:
            raise SystemExit(f"{action.option_strings}: action {type(action).__name__} "
                             "is not one paramlayout reads")
        if not action.option_strings:
            raise SystemExit(f"{action.dest}: a positional argument")
        nargs = action.nargs
        nargs = "0" if nargs == 0 else "" if nargs is None else str(nargs)
        choices = "|".join(choice_text(c) for c in action.choices) if action.choices else ""
        if any("|" in choice_text(c) for c in action.choices or []) or \
                any("|" in s for s in action.option_strings):
            raise SystemExit(f"{action.option_strings}: '|' in a name or choice")
        out.append("  {" + ", ".join([
            cxx_string("|".join(action.option_strings)), cxx_string(action.dest),
            cxx_string(kind), cxx_string(nargs), cxx_string(type_of(action)),
            cxx_string(choices), cxx_string(default_text(action)),
            str(groups.get(id(action), 0)),
            "true" if id(action) in modelopt else "false"]) + "},")
    return out


def table_text():
    checkout = os.environ.get("MEGATRON_LM")
    if checkout:
        sys.path.insert(0, checkout)
    parser = megatron_parser()
    lines = rows(parser)
    header = [
        "// Megatron-LM's arguments as its own parser (megatron/training/arguments.py,",
        "// parse_args) builds them at d98e8a64: option strings, dest, action, nargs, type,",
        "// choices (the values accepted), default, mutually exclusive group (0: none), and",
        "// whether ModelOpt adds it (pretrain_gpt.py with nvidia-modelopt installed).",
        "// Generated by tests/megatron/argument_table.py; do not edit.",
        f"// {len(lines)} arguments.",
    ]
    return "\n".join(header + lines) + "\n"


def megatron_env_python():
    """The python tools/megatron-env.sh prepares (it prints it last), or None."""
    script = Path(__file__).resolve().parents[2] / "tools" / "megatron-env.sh"
    if not script.exists():
        return None
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    return lines[-1] if result.returncode == 0 and lines else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = p.parse_args()
    try:
        text = table_text()
    except ImportError as e:
        python = megatron_env_python()
        if python and os.environ.get("PARAMLAYOUT_IN_MEGATRON_ENV") != "1":
            env = dict(os.environ, PARAMLAYOUT_IN_MEGATRON_ENV="1")
            return subprocess.run([python, __file__, *sys.argv[1:]], env=env).returncode
        print(f"skipped: Megatron-LM does not import here ({e}) and tools/megatron-env.sh "
              "prepared no environment")
        return SKIP
    if args.write:
        Path(args.write).write_text(text)
        print(f"wrote {args.write}: {text.count(chr(10)) - 6} arguments")
        return 0
    old = Path(args.check).read_text()
    if old == text:
        print(f"{args.check}: equal to Megatron-LM's parser ({text.count(chr(10)) - 6} arguments)")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                               args.check, "Megatron-LM's parser"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
