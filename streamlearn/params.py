"""A learner's parameters as the command line gives them: text parsed by each parameter's
declared type, and the listing ``streamlearn learners`` prints.

A value is read by the types its annotation names (``float | str | None``: ``none``, then a
number, then the text), so ``--param average=false`` is ``False``, never the true string
``'false'``; a value that fits none of them is refused with the parameter's name and type.

>>> from streamlearn import MulticlassSVM
>>> parse_params(MulticlassSVM, ["average=false", "lam=1e-4", "batch_size=8", "n_bits=none"])
{'average': False, 'lam': 0.0001, 'batch_size': 8, 'n_bits': None}
>>> parse_params(MulticlassSVM, ["lam=auto"])
{'lam': 'auto'}
>>> parse_params(MulticlassSVM, ["average=maybe"])
Traceback (most recent call last):
...
ValueError: --param average=maybe: MulticlassSVM's average is a bool (true/false, yes/no, on/off, 1/0)
"""

from __future__ import annotations

import ast
import inspect
import re

#: the words a boolean parameter takes, any case
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_TYPE_HELP = {"bool": "a bool (true/false, yes/no, on/off, 1/0)", "int": "an int", "float": "a number",
              "str": "a text", "tuple": "a tuple (e.g. -1,1)", "dict": "a dict (e.g. {\"ef\": 64})", "None": "none"}


#: the order a value is tried in: the narrowest reading first, text last
_ORDER = ("None", "bool", "int", "float", "tuple", "list", "dict", "literal", "str")


def parameters(cls) -> dict[str, inspect.Parameter]:
    """The constructor parameters of a learner class, by name."""
    return dict(inspect.signature(cls).parameters)


def declared_types(parameter: inspect.Parameter) -> list[str]:
    """The type names a parameter's annotation declares (``'float | None'`` → ``['float', 'None']``);
    without an annotation, its default's type (or any Python literal: ``['literal']``)."""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return [t.strip() for t in annotation.split("|")]
    if annotation is not inspect.Parameter.empty:
        return [getattr(annotation, "__name__", str(annotation))]
    default = parameter.default
    if default is None or default is inspect.Parameter.empty:
        return ["literal"]
    return [type(default).__name__]


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError from None


def _as(kind: str, text: str):
    """``text`` as a value of type ``kind``; ``ValueError`` when it is not one."""
    word = text.strip().lower()
    if kind == "None":
        if word in ("none", "null"):
            return None
    elif kind == "bool":
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    elif kind == "int":
        value = _literal(text.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is int:
            return value
    elif kind == "float":
        if word in ("inf", "+inf", "-inf", "nan"):
            return float(word)
        value = _literal(text.strip())
        if type(value) in (int, float):
            return float(value)
    elif kind in ("tuple", "list"):
        value = _literal(text if "(" in text or "[" in text else f"({text},)")
        if isinstance(value, (tuple, list)):
            return tuple(value) if kind == "tuple" else list(value)
    elif kind == "dict":
        value = _literal(text)
        if isinstance(value, dict):
            return value
    elif kind == "str":
        quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "'\""
        return text[1:-1] if quoted else text
    elif kind == "literal":
        try:
            return _literal(text)
        except ValueError:
            return text
    raise ValueError


def parse_value(cls, key: str, text: str):
    """One ``--param KEY=TEXT`` of learner ``cls``, parsed by the parameter's declared types
    (tried in the order none, bool, int, float, tuple, dict, text); a clear ``ValueError`` names
    an unknown parameter or a value of the wrong type."""
    known = parameters(cls)
    if key not in known:
        raise ValueError(f"--param {key}: {cls.__name__} has no parameter {key!r}; it takes: {', '.join(known)} "
                         f"(streamlearn learners {cls.__name__} lists them)")
    kinds = declared_types(known[key])
    for kind in sorted(kinds, key=lambda k: _ORDER.index(k) if k in _ORDER else len(_ORDER)):
        try:
            return _as(kind, text)
        except ValueError:
            continue
    wanted = " or ".join(_TYPE_HELP.get(k, k) for k in kinds)
    raise ValueError(f"--param {key}={text}: {cls.__name__}'s {key} is {wanted}")


def parse_params(cls, items: list[str]) -> dict:
    """``KEY=VALUE`` texts → keyword arguments of ``cls`` (see :func:`parse_value`)."""
    kwargs = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--param expects KEY=VALUE, got {item!r}")
        kwargs[key.strip()] = parse_value(cls, key.strip(), text)
    return kwargs


def describe(cls) -> str:
    """A learner's summary line and each parameter with its type, default and the first sentence
    its docstring gives it, for ``streamlearn learners``."""
    doc = inspect.getdoc(cls) or ""
    summary, words = doc.split("\n\n")[0].replace("\n", " "), parameter_words(doc)
    lines = [f"{cls.__name__}: {summary}"]
    for name, parameter in parameters(cls).items():
        default = "" if parameter.default is inspect.Parameter.empty else f" = {parameter.default!r}"
        lines.append(f"    {name}: {' | '.join(declared_types(parameter))}{default}")
        if name in words:
            lines.append(f"        {words[name]}")
    return "\n".join(lines)


def parameter_words(doc: str) -> dict:
    r"""The first sentence of each entry of a numpydoc ``Parameters`` section (``a, b`` entries: both).

    >>> parameter_words("Text.\n\nParameters\n----------\nlam\n    The step. More.\nseed\n    Recorded only.\n")
    {'lam': 'The step.', 'seed': 'Recorded only.'}
    """
    lines = doc.splitlines()
    try:
        start = next(i for i in range(len(lines) - 1) if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"})
    except StopIteration:
        return {}
    words, names, text = {}, [], []
    for line in lines[start + 2 :] + [""]:
        if line and not line.startswith(" "):  # the next entry, or the next section's title
            if names and text:
                words.update(dict.fromkeys(names, _first_sentence(" ".join(text))))
            if set(line.strip()) == {"-"}:
                break
            names, text = [n.strip() for n in line.split(",")], []
        elif line.strip():
            text.append(line.strip())
    if names and text:
        words.update(dict.fromkeys(names, _first_sentence(" ".join(text))))
    return words


def _first_sentence(text: str, most: int = 110) -> str:
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return first if len(first) <= most else first[: most - 1].rsplit(" ", 1)[0] + " …"
