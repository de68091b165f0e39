"""Links that reproduce a view: the page state mirrored in ``st.query_params``.

What a link carries (query parameter → session state):

- ``net``, ``version``, ``lin`` (``1``/``0``): the sidebar's model configuration; ``device`` is
  informational (a link made on a GPU server opened on a CPU one gives a notice).
- ``ref``: the reference, ``sample:NAME`` or ``synth:KIND:SIZE:SEED:PERIOD`` (``KIND`` with ``_``
  for spaces); ``side``: the working size. An uploaded reference cannot be linked (the file is
  not on the server for the next visitor): the link then carries no ``ref`` and says so.
- ``chain``: the Distortion lab's chain, compact: ``name:param=value,param=value|name2`` (only
  parameters that differ from the default; a tuple as ``0.25/0.5/0.25``), see
  :func:`chain_to_param` and :func:`chain_from_param`.
- each page's own widgets, e.g. ``svb_shift=1``: the page declares them with :func:`declare`
  (before drawing them), which also says whether the page's view depends on the chain.

:func:`read` runs before the sidebar and the page, :func:`declare` in the page before its
widgets (a query parameter that changed since this session last wrote it is validated and copied
into session state, so the widgets start from it); :func:`write` runs after the page (session state → query parameters). A malformed or hostile
value never raises: it becomes a notice, and the view keeps its default. Pure parsing
(:func:`chain_from_param`, :func:`parse_field`) needs no Streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import urlencode

from . import state

#: The longest query value read (characters); the most steps a linked chain may have.
MAX_VALUE_LEN = 600
MAX_STEPS = 8
#: The most characters of a link's value a message repeats (the rest is cut, with "…").
MAX_SHOWN = 80
_LAST = "_links_last"  # session state: the query parameters this session wrote last


@dataclass(frozen=True)
class Field:
    """A widget mirrored in the URL: its session-state ``key``, ``kind`` (``"int"``, ``"float"``,
    ``"bool"`` as ``1``/``0``, ``"choice"``) and its range ``lo``..``hi`` (numbers) or ``choices``."""

    key: str
    kind: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None


_DECLARED = "_links_declared"  # session state: what the page on show declared (its fields, the chain)
#: Every page field key declared in this process: a link's keys of a page left behind are this
#: module's to remove, not a stranger's to keep.
_FIELD_KEYS: set[str] = set()

_SYNTH_SIZES = (64, 96, 128, 192, 256)


# --------------------------------------------------------------------------- pure parsing
def shown(text: Any, *, quote: bool = True) -> str:
    """A value from a link for a message (its ``repr``, or the text itself when not ``quote``),
    cut to :data:`MAX_SHOWN` characters with the length it had."""
    text = str(text)
    show = repr if quote else str
    return show(text) if len(text) <= MAX_SHOWN else show(text[:MAX_SHOWN]) + f"… ({len(text):,} characters)"


def parse_field(field: Field, text: str) -> Any:
    """``text`` as ``field``'s value; ``ValueError`` (with the bad value, cut to :data:`MAX_SHOWN`
    characters) when it is not one."""
    if field.kind == "bool":
        if text not in ("1", "0"):
            raise ValueError(f"{field.key}={shown(text)} is not 1 or 0")
        return text == "1"
    if field.kind == "choice":
        if text not in (field.choices or ()):
            raise ValueError(f"{field.key}={shown(text)} is not one of {list(field.choices or ())}")
        return text
    try:
        value = int(text) if field.kind == "int" else float(text)
    except ValueError:
        raise ValueError(f"{field.key}={shown(text)} is not a{'n integer' if field.kind == 'int' else ' number'}"
                         ) from None
    if not math.isfinite(value) or not field.lo <= value <= field.hi:
        raise ValueError(f"{field.key}={shown(text)} is outside {field.lo:g}..{field.hi:g}")
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return format(value, ".10g")
    if isinstance(value, (tuple, list)):
        return "/".join(_fmt(float(v)) for v in value)
    return str(value)


def chain_to_param(steps: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A chain (``[(name, params), …]``) as ``name:p=v,p=v|name2``; parameters equal to their
    default are left out; an empty chain is ``"none"``."""
    from lpips_explorer.distortions import PARAMS

    parts = []
    for name, params in steps:
        specs = PARAMS.get(name, {})
        kv = [f"{p}={_fmt(v)}" for p, v in params.items()
              if v is not None and not (p in specs and _same(v, specs[p].default))]
        parts.append(name + (":" + ",".join(kv) if kv else ""))
    return "|".join(parts) or "none"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        both = isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))
        return both and list(map(float, a)) == list(map(float, b))
    return a == b


def _param_value(name: str, pname: str, spec, text: str) -> Any:
    where = f"{name}: {pname}={shown(text)}"
    if spec.choices:
        if text not in spec.choices:
            raise ValueError(f"{where} is not one of {list(spec.choices)}")
        return text
    try:
        if isinstance(spec.default, tuple):
            value = tuple(float(t) for t in text.split("/"))
            if not value or len(value) > 31 or not all(math.isfinite(v) for v in value):
                raise ValueError
            return value
        is_int = spec.default is None or (isinstance(spec.default, int) and not isinstance(spec.default, bool))
        value = int(text) if is_int else float(text)
    except ValueError:
        raise ValueError(f"{where} is not a valid value") from None
    if not math.isfinite(value) or not spec.min <= value <= spec.max:
        raise ValueError(f"{where} is outside {spec.min:g}..{spec.max:g}")
    return value


def chain_from_param(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse :func:`chain_to_param`'s form back into ``[(name, params), …]`` with every parameter
    (defaults filled in); ``ValueError`` naming the bad part for anything else (unknown distortion
    or parameter, a value of the wrong type or out of its range, too many steps, too long)."""
    from lpips_explorer.distortions import PARAMS

    if not isinstance(text, str):
        raise TypeError(f"chain must be text, got {type(text).__name__}")
    if len(text) > MAX_VALUE_LEN:
        raise ValueError(f"chain is {len(text)} characters long (at most {MAX_VALUE_LEN})")
    if text.strip() in ("", "none"):
        return []
    parts = text.split("|")
    if len(parts) > MAX_STEPS:
        raise ValueError(f"chain has {len(parts)} steps (at most {MAX_STEPS})")
    steps = []
    for part in parts:
        name, _, rest = part.partition(":")
        if name not in PARAMS:
            raise ValueError(f"unknown distortion {shown(name)} (known: {', '.join(PARAMS)})")
        params = {p: spec.default for p, spec in PARAMS[name].items()}
        for item in filter(None, rest.split(",")):
            pname, eq, value = item.partition("=")
            if not eq or pname not in PARAMS[name]:
                raise ValueError(f"{name}: unknown parameter {shown(pname)} (known: {', '.join(PARAMS[name])})")
            params[pname] = _param_value(name, pname, PARAMS[name][pname], value)
        steps.append((name, params))
    return steps


def ref_param(source: str | None, sample: str | None, synth: tuple | None) -> str | None:
    """The ``ref`` value for the reference picker's state; ``None`` for an upload (not linkable)."""
    if source == "Synthetic" and synth:
        kind, size, seed, period = synth
        return f"synth:{str(kind).replace(' ', '_')}:{int(size)}:{int(seed)}:{int(period)}"
    if source in (None, "Sample photo") and sample:
        return f"sample:{sample}"
    return None


def parse_ref(text: str, samples: Sequence[str]) -> dict[str, Any]:
    """``ref``'s value as the reference picker's session state (``{key: value}``); ``ValueError``
    when it names no sample photo or no valid synthetic image."""
    from .choices import SYNTHETIC

    kind, _, rest = text.partition(":")
    if kind == "sample":
        if rest not in samples:
            raise ValueError(f"ref={shown(text)}: no sample photo of that name (there are: {', '.join(samples)})")
        return {state.REF_SOURCE: "Sample photo", state.REF_SAMPLE: rest}
    if kind == "synth":
        bits = rest.split(":")
        pattern = bits[0].replace("_", " ")
        if pattern not in SYNTHETIC or len(bits) != 4:
            raise ValueError(f"ref={shown(text)}: expected synth:KIND:SIZE:SEED:PERIOD with KIND one of "
                             f"{[s.replace(' ', '_') for s in SYNTHETIC]}")
        try:
            size, seed, period = (int(b) for b in bits[1:])
        except ValueError:
            raise ValueError(f"ref={shown(text)}: SIZE, SEED and PERIOD must be integers") from None
        if size not in _SYNTH_SIZES or not 0 <= seed <= 10_000 or not 2 <= period <= 64:
            raise ValueError(f"ref={shown(text)}: SIZE in {list(_SYNTH_SIZES)}, SEED in 0..10000, PERIOD in 2..64")
        return {state.REF_SOURCE: "Synthetic", state.REF_SYNTH_KIND: pattern, state.REF_SYNTH_SIZE: size,
                state.REF_SYNTH_SEED: seed, state.REF_SYNTH_PERIOD: period}
    raise ValueError(f"ref={shown(text)}: expected sample:NAME or synth:KIND:SIZE:SEED:PERIOD")


def all_keys() -> set[str]:
    """Every query parameter this module reads and writes (others, e.g. ``study``, are left alone)."""
    return {"net", "version", "lin", "device", "ref", "side", "chain"} | _FIELD_KEYS


def link(base_url: str | None, url_path: str, params: Mapping[str, str], *, served_path: str = "") -> str:
    """The link to ``url_path`` with ``params`` (relative when the app's URL is unknown).

    ``base_url`` is the app's URL as Streamlit reports it (``st.context.url``), which ends with the
    path of the page being shown, ``served_path`` (empty for the default page): that is removed
    first, so the link does not name the page twice.
    """
    base = (base_url or "").rstrip("/")
    if served_path and base.endswith("/" + served_path):
        base = base[: -len(served_path) - 1]
    query = urlencode(dict(params))
    return f"{base}/{url_path}" + (f"?{query}" if query else "")


# --------------------------------------------------------------------------- Streamlit side
def read() -> list[str]:
    """Copy the query parameters of the sidebar, the reference and the chain that changed since
    this session last wrote them into session state (before any widget is drawn), and forget what
    the previous page declared (:func:`declare`). Returns the notices for values that were refused."""
    import streamlit as st

    from lpips_core import metric_registry

    from .choices import DEFAULT_SPEC, WORKING_SIDES
    from .models import device_name
    from .pair import sample_names

    ss = st.session_state
    ss[_DECLARED] = ((), False)
    qp = {k: st.query_params.get(k) for k in all_keys() if k in st.query_params}
    last = ss.get(_LAST, {})
    fresh = {k: v for k, v in qp.items() if last.get(k) != v}
    notices: list[str] = []

    def bad(exc: Exception) -> None:
        notices.append(f"This link's {exc} — the default is used instead.")

    info = metric_registry.METRICS[DEFAULT_SPEC.metric]  # the sidebar's metric: its nets and versions
    for key, choices, target in (("net", info.nets, state.NET), ("version", info.versions, state.VERSION)):
        if key in fresh:
            try:
                ss[target] = parse_field(Field(key, "choice", choices=choices), fresh[key])
            except ValueError as exc:
                bad(exc)
    if "lin" in fresh:
        try:
            ss[state.LIN] = parse_field(Field("lin", "choice", choices=("1", "0")), fresh["lin"]) == "1"
        except ValueError as exc:
            bad(exc)
    if "side" in fresh:
        try:
            ss[state.WORKING_SIDE] = int(parse_field(
                Field("side", "choice", choices=tuple(map(str, WORKING_SIDES))), fresh["side"]))
        except ValueError as exc:
            bad(exc)
    if "device" in fresh and fresh["device"] != device_name():
        notices.append(f"This link was made on a server running on {shown(fresh['device'][:20])}; this one runs on "
                       f"{device_name()!r} (the numbers agree to about 1e-5).")
    if "ref" in fresh:
        try:
            ss.update(parse_ref(fresh["ref"][:MAX_VALUE_LEN], sample_names()))
        except ValueError as exc:
            bad(exc)
    if "chain" in fresh:
        try:
            _set_chain(chain_from_param(fresh["chain"]))
        except (ValueError, TypeError) as exc:
            bad(exc)
    return notices


def declare(*fields: Field, chain: bool = False) -> None:
    """A page's links: the page's own widgets a link reproduces (``fields``) and whether its view
    depends on the Distortion lab's chain (``chain``: the link then carries it).

    Called by the page before it draws those widgets: a field's query parameter that changed
    since this session last wrote it is validated and becomes the widget's state; a refused value
    becomes a notice here, and the widget keeps its default.
    """
    import streamlit as st

    from .text import md_escape

    ss = st.session_state
    _FIELD_KEYS.update(f.key for f in fields)
    ss[_DECLARED] = (tuple(fields), bool(chain))
    last = ss.get(_LAST, {})
    for field in fields:
        text = st.query_params.get(field.key)
        if text is None or last.get(field.key) == text:
            continue
        try:
            ss[field.key] = parse_field(field, text[:MAX_VALUE_LEN])
        except ValueError as exc:
            st.warning(md_escape(f"This link's {exc} — the default is used instead."), icon=":material/link_off:")


def _set_chain(steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Make ``steps`` the Distortion lab's editable chain (and the pair other pages study)."""
    import streamlit as st

    ss = st.session_state
    for key in [k for k in ss if isinstance(k, str) and k.startswith("lab_") and k[4:5].isdigit()]:
        del ss[key]  # the old steps' widgets
    first = int(ss.get(state.LAB_NEXT_ID, 0))
    ss[state.LAB_STEPS] = [{"id": first + i, "name": name, "params": dict(params)}
                           for i, (name, params) in enumerate(steps)]
    ss[state.LAB_NEXT_ID] = first + len(steps)
    ss[state.LAB_CHAIN] = [(name, dict(params)) for name, params in steps]


def current() -> dict[str, str]:
    """The query parameters that describe this session's view of the page on show."""
    import streamlit as st

    from .models import device_name, sidebar_spec

    ss = st.session_state
    spec = sidebar_spec()
    out = {"net": spec.net, "version": spec.version, "lin": "1" if spec.lin else "0", "device": device_name()}
    synth = None
    if ss.get(state.REF_SOURCE) == "Synthetic":
        synth = (ss.get(state.REF_SYNTH_KIND, "texture patch"), ss.get(state.REF_SYNTH_SIZE, 128),
                 ss.get(state.REF_SYNTH_SEED, 0), ss.get(state.REF_SYNTH_PERIOD, 8))
    from .choices import DEFAULT_SAMPLE

    ref = ref_param(ss.get(state.REF_SOURCE), ss.get(state.REF_SAMPLE, DEFAULT_SAMPLE), synth)
    if ref:
        out["ref"] = ref
    if state.WORKING_SIDE in ss:
        out["side"] = str(ss[state.WORKING_SIDE])
    fields, chain = ss.get(_DECLARED, ((), False))
    if chain and ss.get(state.LAB_CHAIN) is not None:
        out["chain"] = chain_to_param(ss[state.LAB_CHAIN])
    for field in fields:
        if ss.get(field.key) is not None:
            out[field.key] = _fmt(ss[field.key])
    return out


def write() -> dict[str, str]:
    """Mirror this session's view into ``st.query_params`` (only this module's keys; only what
    changed) and remember it; returns the parameters."""
    import streamlit as st

    want = current()
    mine = all_keys()
    have = st.query_params.to_dict()
    if any(have.get(key) != want.get(key) for key in mine):
        # one change of the address, not one per parameter: every change is an entry in the
        # browser's history, and the back button would step through them one by one
        st.query_params.from_dict({**{k: v for k, v in have.items() if k not in mine}, **want})
    st.session_state[_LAST] = dict(want)
    return want


#: Session-state key of the "Link to this view" expander's open state.
LINK_OPEN = "link_open"


def link_control(url_path: str, params: Mapping[str, str], *, served_path: str = "") -> None:
    """The sidebar's "Link to this view": the URL in ``st.code`` (its copy icon copies it).

    The expander is lazy (:data:`LINK_OPEN`): the code block is sent only while it is open. Any
    ``st.code`` on a page makes the browser fetch and parse Streamlit's syntax highlighter
    (1.5 MB of JavaScript), measured as part of the ~1.3 s a new session spent loading scripts.
    """
    import streamlit as st

    box = st.sidebar.expander("Link to this view", icon=":material/link:", key=LINK_OPEN, on_change="rerun")
    if not box.open:
        return
    with box:
        st.code(link(st.context.url, url_path, params, served_path=served_path), language=None, wrap_lines=True)
        st.caption("Copy it with the icon at its top right: it opens this page with the same backbone, "
                   "reference, distortions and sliders.")
        if st.session_state.get(state.REF_SOURCE) == "Upload":
            st.caption(":material/warning: The reference is an upload: a link cannot carry a file, so it "
                       "opens with the default sample photo.")
