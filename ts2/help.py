"""``ts2 COMMAND --help``: the command's purpose, its keys with defaults and meanings, examples.

Everything comes from the config files themselves: the purpose from the primary config's opening
comment, each key's meaning from its comment (inline, or the comment line just above it), the
defaults from the composed config, the config groups from the defaults lists the command really
composes. A key added to a config with a comment appears here without any change to Python.
"""

from __future__ import annotations

import re
from importlib.resources import files

from omegaconf import DictConfig, ListConfig, OmegaConf

__all__ = ["command_help", "key_meanings", "config_groups"]

_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][\w.-]*)\s*:(?P<rest>.*)$")


def _split_comment(text: str) -> tuple[str, str]:
    """``value  # comment`` -> (value, comment); a ``#`` inside quotes is part of the value."""
    quote = None
    for i, ch in enumerate(text):
        if ch in "'\"":
            quote = None if quote == ch else (ch if quote is None else quote)
        elif ch == "#" and quote is None and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1:].strip()
    return text.strip(), ""


def _read(name: str) -> str | None:
    try:
        return files("conf").joinpath(*f"{name}.yaml".split("/")).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None


def _file_meanings(text: str, prefix: str = "") -> dict[str, str]:
    """Dotted key -> comment, for every key line of one YAML file."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    above = ""
    in_defaults = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            above = ""
            continue
        if stripped.startswith("#"):
            above = stripped.lstrip("#").strip() if not above else above
            continue
        m = _KEY_LINE.match(line)
        if not m or stripped.startswith("-"):
            above = ""
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = m["key"]
        if indent == 0:
            in_defaults = key in ("defaults", "hydra")
        _, comment = _split_comment(m["rest"])
        if not in_defaults:
            path = ".".join([s for _, s in stack] + [key])
            meaning = comment or above
            if meaning:
                out[prefix + path] = meaning
        stack.append((indent, key))
        above = ""
    return out


def _defaults(text: str) -> list[str]:
    """The entries of a file's defaults list, as written (``- dataset: mini`` -> ``dataset: mini``)."""
    out, inside = [], False
    for line in text.splitlines():
        if re.match(r"^defaults\s*:", line):
            inside = True
            continue
        if inside:
            if line and not line[0].isspace() and not line.startswith("-"):
                break
            s = line.strip()
            if s.startswith("- "):
                out.append(_split_comment(s[2:])[0])
    return out


def _global_includes(config_name: str, seen: set[str] | None = None) -> list[str]:
    """The primary config and every config merged into its root: ``- score`` in run.yaml, and group
    files declared ``# @package _global_`` (``- analysis: default``)."""
    seen = set() if seen is None else seen
    if config_name in seen:
        return []
    seen.add(config_name)
    text = _read(config_name)
    if text is None:
        return []
    names = [config_name]
    for entry in _defaults(text):
        if entry.startswith("override ") or entry in ("_self_",):
            continue
        if ":" not in entry:  # a config of the same folder, merged at the root
            names += _global_includes(entry.lstrip("/"), seen)
            continue
        group, _, option = (x.strip() for x in entry.partition(":"))
        if "@" in group or option in ("null", "None", ""):
            continue
        sub = _read(f"{group.lstrip('/')}/{option}") or ""
        if "@package _global_" in "\n".join(sub.splitlines()[:3]):
            names += _global_includes(f"{group.lstrip('/')}/{option}", seen)
    return names


def key_meanings(config_name: str) -> dict[str, str]:
    """Dotted key -> one-line meaning, from the comments of every file merged into the root."""
    out: dict[str, str] = {}
    for name in reversed(_global_includes(config_name)):
        out.update(_file_meanings(_read(name) or ""))
    return out


def config_groups(cfg) -> dict[str, str]:
    """Group (as chosen on the command line) -> chosen option, for the groups this config composed."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return {str(k): str(v) for k, v in choices.items() if not str(k).startswith("hydra/")}


def _show(value) -> str:
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value).replace("'", "")
    return text if len(text) <= 38 else text[:35] + "..."


def _purpose(config_name: str) -> list[str]:
    lines = []
    for line in (_read(config_name) or "").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").rstrip()[1:] if line.startswith("# ") else line.lstrip("#"))
    return lines


def command_help(prog: str, command, cfg) -> str:
    """The help text of one command: purpose, actions, config groups, keys, examples."""
    out = [f"{prog}: {command.help}", ""]
    out += [f"  {ln}" if ln else "" for ln in _purpose(command.config)]
    if command.actions:
        out += ["", f"actions: {' | '.join(command.actions)}  (the first word after `{prog}`)"]
    groups, group_roots = _group_lines(cfg)
    out += groups
    out += ["", "keys (KEY=VALUE; default shown):"]
    out += _key_lines(cfg, group_roots, key_meanings(command.config))
    if command.examples:
        out += ["", "examples:"] + [f"  {e}" for e in command.examples]
    out += ["", f"`{prog} --cfg job [overrides]` prints the composed config; a group's own keys are set as "
                "GROUP.KEY=VALUE (e.g. metric.model=DIR)."]
    return "\n".join(out)


def _group_lines(cfg) -> tuple[list[str], set[str]]:
    """The ``config groups`` section (each group with its chosen option and the options it has; a group
    used twice lists its options once) and the config keys the groups fill, which the keys section skips."""
    from ts2.config_check import group_options

    groups = config_groups(cfg)
    group_roots: set[str] = set()
    listed_groups: set[str] = set()
    if not groups:
        return [], group_roots
    out = ["", "config groups (GROUP=OPTION):"]
    for g, choice in sorted(groups.items(), key=lambda kv: ("@" in kv[0], kv[0])):
        name = g.split("@")[0]
        where = g.split("@")[1] if "@" in g else name
        group_roots.add(where.split(".")[0] if "." not in name else where)
        opts = group_options(name.lstrip("/"))
        listed = f"options: {', '.join(opts)}" if name not in listed_groups else f"options of {name}: as above"
        listed_groups.add(name)
        shown = f"{where}={choice}" if where == name else f"{where}={choice} ({name})"
        out.append(f"  {shown:<34} {listed}")
    return out, group_roots


def _shown_value(node):
    """What a key's line shows of its node: a nested config as it is, a plain value by its value."""
    return node if isinstance(node, (DictConfig, ListConfig)) else node._value()


def _key_lines(cfg, group_roots: set[str], meanings: dict[str, str]) -> list[str]:
    """The ``keys`` section: every key outside ``hydra`` and the groups, with its default and meaning; the keys
    of a non-empty mapping (other than ``metrics``) one by one, by their dotted path."""
    body = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    out = []
    for key in body.keys():
        if key in group_roots:
            continue
        node = body._get_node(key)
        if isinstance(node, DictConfig) and not node._is_none() and len(node) and key not in ("metrics",):
            out += [_key_line(f"{key}.{sub}", _shown_value(node._get_node(sub)), meanings) for sub in node.keys()]
            continue
        out.append(_key_line(key, _shown_value(node), meanings))
    return out


def _key_line(path: str, value, meanings: dict[str, str]) -> str:
    return f"  {path + '=' + _show(value):<44}  {meanings.get(path, '')}".rstrip()
