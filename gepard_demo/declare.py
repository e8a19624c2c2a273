"""How a setting is declared: one `setting(...)` on its dataclass field (settings.py) says how it
is written as text and how the page shows it, and every surface derives from that.

- `Text`: the command-line flag (settings_flags), a take's synth line, a sweep axis's values.
- `served`: how a speech server takes it (fixed at its start, per request, or in a group of our
  extension fields): the server's checks and /v1/models listing, and what a served page greys out
  and a served eval refuses, follow it.
- `tag` / `sweep`: a short name (a take's label, a sweep point's folder) and, for the settings an
  eval sweep varies unless told otherwise, their default values (eval/sweeps/grid.py).
- `kind`: the values it takes, as a type (`float`, `int | None`, `int | str | None`...): whether it
  is a switch (a flag without a value, a checkbox), counts in whole numbers, may be unset (None)
  or may be a word. Every surface asks `switch`, `whole_number`, `may_be_unset` and
  `takes_a_word`, which read it; the field's annotation says the same for type checkers
  (tests/test_declare.py holds the two together).
- `Range`: a number's one range. The dataclass refuses a value outside it when made (its
  `__post_init__` runs `validate`, which asks `out_of_range`), so a flag, a server request and the
  page all meet the same bound; the page's slider spans it.
- `Control`: the page's control, on the Speak tab and the Eval tab's forms alike (ui/page/controls.py
  parses and ui/page/fields.py builds them): its group, widget, step, label and element id.

Semantics (what a value does, the checks a range cannot say) stay on the dataclass and in model/. Adding a setting is one `setting(...)` line plus its meaning there: docs/DESIGN.md
walks through it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

# The page's groups of controls, in the order Generate takes them after the text: the Sampling
# accordion, the Streaming one, "Voice and guidance" (after its reference clip), and the
# derailment guardrails (a sub-group of Sampling on the page), then how the text arrives (the Text
# arrival accordion) and how it is read (the text front end's accordion); the later groups came
# later, so they come last in the API for old clients.
PAGE_GROUPS = ("sampling", "stream", "voice", "guardrails", "text", "reading")
# How a speech server takes a setting: fixed when the server starts (vLLM-Omni reads it from
# gepard_config.json and refuses extra_params per request), with each request (the seed,
# max_new_tokens), or as one of our extension-field groups, which a server lists in its /v1/models
# entry (serving/cloning.py) and a served page or eval refuses to send to a server that does not.
SERVED = ("fixed", "request", "guidance", "guardrails", "normalization")
WIDGETS = ("slider", "checkbox", "radio", "text", "seed")
# The values a setting takes: a type or a union of types, as its field is annotated (`int | None`).
Kind = type | types.UnionType


@dataclass(frozen=True)
class Text:
    """How a setting is written and read wherever it is text. `write` returns None for a value
    that is written by leaving the flag out (cfg_frames unset); `choices` limits a word setting."""

    read: Callable[[str], Any]
    write: Callable[[Any], str | None] = str
    help: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Range:
    """A number setting's one range: what its dataclass accepts when made (and so what a flag, a
    server request or the page may send), and what the page's slider spans. An open end (a
    temperature of 0 divides by zero) is refused; the slider stops one step inside it."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, x: object) -> bool:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:  # NaN is in no range
            return False
        above = self.lo < x if self.lo_open else self.lo <= x
        below = x < self.hi if self.hi_open else x <= self.hi
        return above and below

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{show(self.lo)}, {show(self.hi)}{')' if self.hi_open else ']'}"


def show(x: float) -> str:
    """A bound or value as a person reads it: 5, not 5.0; 2**63 - 1 in full."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**64 else f"{x:g}"


@dataclass(frozen=True)
class Control:
    """How the page shows a setting.

    widget: "slider" (a number in the setting's Range, by step), "checkbox", "radio" (the Text's choices),
        "text" (read and written by the Text: the force stop takes "auto" and "off"), or
        "seed" (a text box, exact past 2**53, beside a "random seed" checkbox).
    unset: what a slider shows for an unset setting (cfg_frames: 0 = every frame).
    """

    group: str
    label: str
    key: str  # the element id after the form's prefix: "gepard-" + key on the Speak tab, "eval-" + key on Eval
    widget: str = "slider"
    step: float = 1
    unset: Any = None
    range: Range | None = None  # the setting's own, set by setting(): never declared here

    @property
    def lo(self) -> float:
        """Where the slider starts: the range's low end (one step inside when it is open), or the
        value that shows unset (cfg_frames' 0) below it."""
        assert self.range is not None, f"control {self.key} has no range"
        lo = self.range.lo + self.step if self.range.lo_open else self.range.lo
        return lo if self.unset is None else min(lo, self.unset)

    @property
    def hi(self) -> float:
        assert self.range is not None, f"control {self.key} has no range"
        return self.range.hi - self.step if self.range.hi_open else self.range.hi

    @property
    def short(self) -> str:
        """The label's head, before its explanation (in parentheses, or after a colon): "Top-k",
        "Penalty window". A column of the takes table is headed by it."""
        return self.label.split(" (")[0].split(":")[0]

    def __post_init__(self):
        if self.group not in PAGE_GROUPS or self.widget not in WIDGETS:
            raise ValueError(f"control {self.key}: group must be one of {PAGE_GROUPS} and widget one of {WIDGETS}")


def setting(default: Any, *, kind: Kind, read: Callable[[str], Any] | None = None,
            write: Callable[[Any], str | None] = str, help: str = "", metavar: str | None = None,
            choices: tuple[str, ...] | None = None, range: Range | None = None, page: Control | None = None,
            served: str = "fixed", needs: str | None = None, tag: str | None = None, sweep: tuple = ()) -> Any:
    """A dataclass field with its declarations: the values it takes (`kind`: a type such as
    `float` or `int | str | None`), a Text when it has a `read` (a flag), a Control when it has a
    `page`, how a speech server takes it (SERVED), the setting it only qualifies (`needs`: it
    changes nothing while that one is at its default; in_effect), its short `tag`, and the values
    a sweep gives it by default (`sweep`: a default axis of every sweep). `range`: a number's one
    Range, checked when its dataclass is made (out_of_range) and spanned by its slider."""
    if not all(isinstance(k, type) for k in _members(kind)):
        raise ValueError(f"kind must be a type or a union of types (int | None), got {kind!r}")
    if not isinstance(default, kind):
        raise ValueError(f"the default {default!r} is not of the declared kind {kind}")
    if served not in SERVED:
        raise ValueError(f"served must be one of {SERVED}, got {served!r}")
    if sweep and tag is None:
        raise ValueError("a default sweep axis needs a tag: it names the sweep's point folders")
    meta: dict[str, Any] = {"kind": kind, "served": served, "needs": needs, "tag": tag, "sweep": tuple(sweep)}
    if read is not None:
        meta["text"] = Text(read, write, help, metavar, choices)
    if range is not None:
        meta["range"] = range
    if page is not None:
        if page.range is not None:
            raise ValueError(f"control {page.key}: its range is the setting's (setting(range=...))")
        if page.widget in ("slider", "seed") and range is None:
            raise ValueError(f"control {page.key}: a {page.widget} needs the setting's range")
        meta["page"] = dataclasses.replace(page, range=range)
    return field(default=default, metadata=meta)


def range_of(cls: type, name: str) -> Range | None:
    return next(f.metadata.get("range") for f in dataclasses.fields(cls) if f.name == name)


class Declared(Protocol):
    """A settings dataclass (what dataclasses.fields reads): its fields carry the declarations."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


def out_of_range(settings: Declared) -> tuple[str, str] | None:
    """The first setting (in field order) whose value is outside its Range, as (name, message);
    None when all are inside. An unset value (None) and a word ("auto") are their setting's
    own check (a Range holds numbers)."""
    for f in dataclasses.fields(settings):
        r, value = f.metadata.get("range"), getattr(settings, f.name)
        if r is None or value is None or isinstance(value, str):
            continue
        if whole_number(type(settings), f.name) and (isinstance(value, bool) or not isinstance(value, int)):
            return f.name, f"{f.name} must be a whole number in {r}, got {value!r}"
        if value not in r:
            return f.name, f"{f.name} must be in {r}, got {show(value) if isinstance(value, (int, float)) else repr(value)}"
    return None


def declared(cls) -> dict[str, Text]:
    """The settings of `cls` that are written as text (a flag each), by name, in field order."""
    return {f.name: f.metadata["text"] for f in dataclasses.fields(cls) if "text" in f.metadata}


def page_controls(cls) -> dict[str, Control]:
    """The settings of `cls` the page shows, by name, in field order."""
    return {f.name: f.metadata["page"] for f in dataclasses.fields(cls) if "page" in f.metadata}


def tags(cls) -> dict[str, str]:
    """The settings of `cls` with a short tag, by name, in field order."""
    return {f.name: f.metadata["tag"] for f in dataclasses.fields(cls) if f.metadata.get("tag")}


def tagged(settings) -> list[str]:
    """A settings dataclass in short: "T 0.3", "k 0"... for each tagged setting, a switch as its
    tag alone when on (and left out when off)."""
    parts, values = [], values_of(settings)
    for name, tag in tags(type(settings)).items():
        value = values[name]
        if isinstance(value, bool):
            parts += [tag] if value else []
        else:
            parts.append(f"{tag} {value:g}" if isinstance(value, float) else f"{tag} {value}")
    return parts


def sweep_defaults(cls) -> dict[str, tuple]:
    """The axes every sweep of `cls` has unless told otherwise, with their default values, in
    field order."""
    return {f.name: f.metadata["sweep"] for f in dataclasses.fields(cls) if f.metadata.get("sweep")}


def served_as(cls, how: str) -> tuple[str, ...]:
    """The settings of `cls` a speech server takes `how` (SERVED), in field order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("served") == how)


def values_of(settings, names=None) -> dict[str, Any]:
    """A settings dataclass's values by field name: every field, or `names` in their order."""
    every = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    return every if names is None else {n: every[n] for n in names}


def changed(settings) -> dict[str, Any]:
    """The fields of a settings dataclass whose values differ from its defaults."""
    default = values_of(type(settings)())
    return {k: v for k, v in values_of(settings).items() if v != default[k]}


def in_effect(settings, names) -> dict[str, Any]:
    """Of `names`, the settings that change something, with their values: those that differ from
    their default, and each that qualifies one of them (`needs`) whenever that one does and it
    is set. A request carries only these, so one that changes nothing is the plain protocol's."""
    moved, values = changed(settings), values_of(settings)
    needs = {f.name: f.metadata.get("needs") for f in dataclasses.fields(settings)}
    return {n: values[n] for n in names
            if (n in moved if needs[n] is None else needs[n] in moved and values[n] is not None)}


def kind_of(cls, name: str) -> Kind:
    """The values a setting takes, as its `setting(...)` declares them (`float`, `int | None`...)."""
    meta = next((f.metadata for f in dataclasses.fields(cls) if f.name == name), None)
    if meta is None or "kind" not in meta:
        raise KeyError(f"{cls.__name__}.{name} is not a declared setting (it has no setting(..., kind=...))")
    return meta["kind"]


def _members(kind: Kind) -> tuple[type, ...]:
    """A kind's types: int | str | None -> (int, str, NoneType); float -> (float,)."""
    return typing.get_args(kind) if typing.get_origin(kind) in (types.UnionType, typing.Union) else (kind,)


def switch(cls, name: str) -> bool:
    """Whether a setting is an on/off switch (kind bool: a flag without a value)."""
    return kind_of(cls, name) is bool


def whole_number(cls, name: str) -> bool:
    """Whether a setting takes whole numbers (its kind has int and not float; bool is a switch)."""
    members = _members(kind_of(cls, name))
    return int in members and float not in members


def may_be_unset(cls, name: str) -> bool:
    """Whether a setting's value may be None (unset: the seed, the guided frames, the force stop)."""
    return type(None) in _members(kind_of(cls, name))


def takes_a_word(cls, name: str) -> bool:
    """Whether a setting's value may be a word (its kind has str: the force stop's "auto", a choice)."""
    return str in _members(kind_of(cls, name))
