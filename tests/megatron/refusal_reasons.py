"""What a refusal is about: the Megatron-LM arguments its reason names.

Megatron-LM's reason is read from three places: its exception's message, the statement that
raised it (the `assert`, or the `raise` together with the `if` that chose it, in the deepest
frame of Megatron-LM's own code) and, when its parser exits, argparse's error. paramlayout's
reason is its message. Arguments are compared by their dest (`--num-layers` and
`args.num_layers` are both `num_layers`). Two refusals agree when they name an argument in
common; a refusal of Megatron-LM's that names none (only a module's own variables, say)
cannot be compared, and says so."""
import ast
import functools
import re
import traceback

_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
_ATTRIBUTE = re.compile(r"\b(?:args|self|config|cfg|transformer_config|provider)\."
                        r"([a-z][a-z0-9]*(?:_[a-z0-9]+)*)")
_DEST = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
_OPTION_DESTS = {}  # "--disable-bias-linear": "add_bias_linear", from Megatron-LM's parser


def learn_options(parser):
    """Each option string of PARSER (Megatron-LM's ArgumentParser) with the dest it sets."""
    for action in parser._actions:
        for option in action.option_strings:
            _OPTION_DESTS[option] = action.dest


def dest(flag):
    """The dest --FLAG sets in Megatron-LM's parser (its name in snake case if unknown)."""
    return _OPTION_DESTS.get("--" + flag, flag.replace("-", "_"))


def names_in_text(text):
    """The argument dests TEXT names: each --flag, and each snake_case word."""
    names = {dest(flag) for flag in _FLAG.findall(text)}
    return names | set(_DEST.findall(_FLAG.sub(" ", text)))


@functools.lru_cache(maxsize=None)
def _statements(path):
    """Every statement of the file at PATH, with the `if` each lies in (None where the file
    cannot be read or parsed)."""
    try:
        source = open(path, encoding="utf-8").read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return None
    found = []

    def walk(node, enclosing_if):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                found.append((child, enclosing_if))
            walk(child, child if isinstance(child, ast.If) else enclosing_if)

    walk(tree, None)
    return source, found


def raising_statement(error):
    """The source of the statement that raised ERROR in the deepest frame of Megatron-LM's
    (or Megatron-Bridge's) code, with the test of the `if` a `raise` lies in; '' if none."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/megatron/" in f.filename]
    if not ours:
        return ""
    frame = ours[-1]
    parsed = _statements(frame.filename)
    if parsed is None:
        return frame.line or ""
    source, statements = parsed
    inner = [(s, i) for s, i in statements
             if s.lineno <= frame.lineno <= (s.end_lineno or s.lineno)]
    if not inner:
        return frame.line or ""
    statement, enclosing_if = min(inner, key=lambda si: (si[0].end_lineno or si[0].lineno)
                                  - si[0].lineno)
    text = ast.get_source_segment(source, statement) or ""
    if isinstance(statement, ast.Raise) and enclosing_if is not None:
        text = (ast.get_source_segment(source, enclosing_if.test) or "") + "\n" + text
    return text


@functools.lru_cache(maxsize=None)
def config_fields():
    """{TransformerConfig field: the argument dests it is set from}, for the fields
    core_transformer_config_from_args sets by name (`kw_args['num_moe_experts'] =
    args.num_experts`), read from that function's source."""
    try:
        from megatron.training import argument_utils
        tree = ast.parse(open(argument_utils.__file__, encoding="utf-8").read())
    except (ImportError, OSError, SyntaxError):
        return {}
    fields = {}
    for function in ast.walk(tree):
        if not (isinstance(function, ast.FunctionDef)
                and function.name == "core_transformer_config_from_args"):
            continue
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and target.value.id == "kw_args" and isinstance(target.slice, ast.Constant)):
                continue
            for part in ast.walk(node.value):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) \
                        and part.value.id == "args":
                    fields.setdefault(target.slice.value, set()).add(part.attr)
    return fields


def megatron_subjects(error, parser_error=""):
    """The argument dests Megatron-LM's refusal ERROR is about (PARSER_ERROR: what argparse
    printed when the parser exited); a TransformerConfig field stands for the arguments it is
    set from."""
    statement = raising_statement(error)
    names = (names_in_text(f"{error}\n{parser_error}") | set(_ATTRIBUTE.findall(statement))
             | {dest(flag) for flag in _FLAG.findall(statement)}
             | set(_DEST.findall(_ATTRIBUTE.sub(" ", _FLAG.sub(" ", statement)))))
    for name in list(names):
        names |= config_fields().get(name, set())
    # Only arguments count: a model module's own names (Falcon-H1's mixer asserts on its
    # `ngroups` and `tp_size`) name none.
    known = set(_OPTION_DESTS.values())
    return {n for n in names if not known or any(_same(n, d) for d in known)}


def _same(a, b):
    """A and B name one argument: equal, or one derived from the other by a prefix
    (transformer_pipeline_model_parallel_size from pipeline_model_parallel_size)."""
    return a == b or a.endswith("_" + b) or b.endswith("_" + a)


def compare(megatron_reason, megatron_names, paramlayout_message):
    """(agree, the line to print): whether the two refusals name an argument in common."""
    ours = names_in_text(paramlayout_message)
    shared = sorted({b for a in megatron_names for b in ours if _same(a, b)})
    if shared or not megatron_names:
        about = f"about {', '.join(shared)}" if shared else \
            "Megatron-LM's reason names no argument, not compared"
        return True, (f"both refuse the line ({about}): Megatron-LM: {megatron_reason}; "
                      f"paramlayout: {paramlayout_message}")
    return False, (f"both refuse the line, for different reasons: Megatron-LM: "
                   f"{megatron_reason} (about {', '.join(sorted(megatron_names))}); "
                   f"paramlayout: {paramlayout_message} "
                   f"(about {', '.join(sorted(ours)) or 'no argument'})")
