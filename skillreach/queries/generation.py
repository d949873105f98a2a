"""LLM query generation, the pure part: prompts, masking, reply parsing, filtering, leaks, checkpoints.

No network and no Prefect here; the Messages API call lives in ``tasks/generate.py`` and the
orchestration in ``flows/generate_queries.py``. The path of one generation:

1. :func:`plan_requests` renders one request per target skill (Jinja2 templates
   ``skillreach/templates/generate_system.j2`` and ``generate_user.j2``, ``StrictUndefined``) asking
   for ``per_skill`` drafts of each kind. The model sees skill **bodies** only, inside
   ``<skill_body id="...">`` tags with the instruction that their content is data. Bodies are masked
   (:func:`mask_text`): every shown skill's name and its hyphen/underscore/space/joined variants become
   ``[SKILL]`` (the target) or ``[RIVAL-n]`` (a BM25 rival), and every passage of the body that
   repeats a description — a run of :data:`PHRASE_WORDS` consecutive words of the description holding
   at least two non-stopwords, a phrase the description quotes, or the whole of a short description —
   becomes ``[…]`` (whatever the layout between the words; blank lines are kept). So no
   description's text reaches the model and queries cannot parrot it.
   ``neighbor_negative`` drafts sound like the target but belong to a named rival (the top
   :attr:`GenerationParams.rivals` BM25 rivals with a positive score, from
   :func:`skillreach.skills.bm25.rivals`;
   their masked bodies are shown too) and are labelled with that rival.
2. :func:`parse_reply` reads the model's JSON (code fences and prose around it are tolerated); a reply
   with no JSON list of drafts raises :class:`MalformedReply` (the caller retries once, then records the
   target as failed).
3. :func:`assemble` turns the drafts of every target into queries, dropping and counting: malformed
   drafts, drafts containing a placeholder, unknown rivals, citations that are missing
   (fewer than :data:`MIN_CITATION_WORDS` words) or not found verbatim in the body the draft is
   grounded in (the rival's for a neighbour negative, the target's otherwise; compared after
   normalising Unicode, case, whitespace, quote style and markdown ``*``/backticks), valid drafts
   beyond ``per_skill`` of a kind (surplus), exact duplicates
   (same normalised text) and near-duplicates (token Jaccard ≥ :data:`JACCARD_THRESHOLD` over
   :func:`skillreach.skills.bm25.tokenize` tokens). The first draft wins; targets are taken in name order.
4. :func:`leak_report` flags queries that name their skill (its name or a variant, or one of its
   name's words) or contain tokens only its description has (in its description, in no skill's body
   and in no other skill's description). ``drop_leaks`` removes them.
5. Provenance (:func:`generation_provenance`) and the sealing by :func:`skillreach.queries.sets.seal`.

The checkpoint (:class:`Checkpoint`, ``<out>.checkpoint.jsonl``) holds a header (catalog digest,
template digest, model, temperature, per-skill count, kinds, rivals) and one line per finished target
(its raw drafts, the resolved model, usage, the request's digest). A run resumes from it without
repeating a finished target's request; a header that differs refuses the checkpoint, naming what
changed. Failed targets are not checkpointed: the next run tries them again.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import Field, field_validator

from skillreach.errors import InputError, MalformedReply
from skillreach.models import Catalog, Frozen, Query, QueryKind, Skill, Usage, sha256_hex

__all__ = [
    "CHECKPOINT_SCHEMA",
    "DEFAULT_GENERATOR_MODEL",
    "JACCARD_THRESHOLD",
    "KIND_CODES",
    "MIN_CITATION_WORDS",
    "NEAR_DUPLICATE_RULE",
    "PHRASE_PLACEHOLDER",
    "PHRASE_WORDS",
    "TARGET_LABEL",
    "Assembly",
    "GenerationParams",
    "GenerationReport",
    "GenerationRequest",
    "LeakEntry",
    "MalformedReply",
    "ShownBody",
    "TargetReport",
    "TargetResult",
    "assemble",
    "description_only_tokens",
    "generation_provenance",
    "leak_report",
    "mask_text",
    "name_pattern",
    "parse_reply",
    "plan_requests",
    "rivals_for",
    "template_digest",
]

DEFAULT_GENERATOR_MODEL = "claude-sonnet-5-5"
TARGET_LABEL = "SKILL"
PHRASE_PLACEHOLDER = "[…]"
PHRASE_WORDS = 4
"""A body passage repeating this many consecutive description words (≥ 2 of them non-stopwords) is masked."""
MIN_CITATION_WORDS = 4
JACCARD_THRESHOLD = 0.8
NEAR_DUPLICATE_RULE = (
    "same text after normalising case, Unicode, punctuation and whitespace, or token Jaccard "
    f"≥ {JACCARD_THRESHOLD} (skillreach.skills.bm25.tokenize tokens, stopwords removed); "
    "the first draft is kept"
)
MAX_TARGET_CHARS = 24_000
MAX_RIVAL_CHARS = 8_000
MAX_QUERY_CHARS = 4_000
MAX_OTHER_NAMES = 300
CHECKPOINT_SCHEMA = 1
CHECKPOINT_KIND = "skillreach-generation-checkpoint"

KIND_CODES: dict[QueryKind, str] = {
    QueryKind.implicit: "imp",
    QueryKind.contextual: "ctx",
    QueryKind.neighbor_negative: "nn",
    QueryKind.out_of_scope: "oos",
}

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
SYSTEM_TEMPLATE = "generate_system.j2"
USER_TEMPLATE = "generate_user.j2"

_TOKEN = re.compile(r"[^\W_]+")
_PLACEHOLDER = re.compile(r"\[(?:SKILL|RIVAL-\d+)\]|\[…\]|\[\.\.\.\]")
_QUOTED = re.compile(r"[\"“”]([^\"“”\n]{3,160})[\"“”]")
_TAG = re.compile(r"<(/?)\s*skill_body", re.IGNORECASE)


# ------------------------------------------------------------------------------------------ params


class GenerationParams(Frozen):
    """What a generation is pinned to (recorded in the checkpoint and the provenance)."""

    model: str = DEFAULT_GENERATOR_MODEL
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    """``None``: the model's default (current Claude models refuse a ``temperature``)."""
    per_skill: int = Field(default=4, ge=1, le=50)
    """Drafts asked for per kind and target skill."""
    kinds: tuple[QueryKind, ...] = tuple(QueryKind)
    rivals: int = Field(default=2, ge=1, le=5)
    """How many BM25 rivals are shown per target for ``neighbor_negative`` drafts."""

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: tuple[QueryKind, ...]) -> tuple[QueryKind, ...]:
        if not v:
            raise ValueError("at least one kind is needed")
        return tuple(k for k in QueryKind if k in v)  # spec order, no repeats

    def max_tokens(self, kinds: int) -> int:
        return min(16_000, 1_024 + self.per_skill * kinds * 300)


# ---------------------------------------------------------------------------------------- masking


def _fold(text: str) -> str:
    return text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()


def _tokens_with_spans(text: str) -> list[tuple[str, int, int]]:
    return [(_fold(m.group()), m.start(), m.end()) for m in _TOKEN.finditer(text)]


@lru_cache(maxsize=4096)
def name_pattern(name: str) -> re.Pattern[str]:
    """A skill's name and its variants: ``pdf-editor``, ``pdf editor``, ``pdf_editor``, ``PdfEditor``
    (case-insensitive, as a whole word)."""
    parts = [p for p in re.split(r"[\W_]+", name) if p] or [name]
    inner = r"(?:[-_]|\s+)?".join(re.escape(p) for p in parts)
    # not inside a longer hyphenated word: ``python-docx`` keeps its ``docx``
    return re.compile(rf"(?<![\w-]){inner}(?![\w-])", re.IGNORECASE)


def _content(tokens: Sequence[str]) -> int:
    from skillreach.skills.bm25 import STOPWORDS

    return sum(1 for t in tokens if t not in STOPWORDS)


@lru_cache(maxsize=4096)
def _description_sequences(
    description: str,
) -> tuple[frozenset[tuple[str, ...]], tuple[tuple[str, ...], ...]]:
    """The n-grams of a description worth masking, and its quoted phrases (as token tuples)."""
    tokens = [t for t, _, _ in _tokens_with_spans(description)]
    grams: set[tuple[str, ...]] = set()
    if len(tokens) >= PHRASE_WORDS:
        for i in range(len(tokens) - PHRASE_WORDS + 1):
            gram = tuple(tokens[i : i + PHRASE_WORDS])
            if _content(gram) >= 2:
                grams.add(gram)
    extra: list[tuple[str, ...]] = []
    if 0 < len(tokens) < PHRASE_WORDS and _content(tokens) >= 1:
        extra.append(tuple(tokens))
    for m in _QUOTED.finditer(description):
        quoted = tuple(t for t, _, _ in _tokens_with_spans(m.group(1)))
        if len(quoted) >= 2 and _content(quoted) >= 1:
            extra.append(quoted)
    return frozenset(grams), tuple(extra)


_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _phrase_spans(descriptions: Sequence[str], text: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` that repeat any of the descriptions (see the module docstring).

    A phrase is found whatever the layout between its words; its span is cut at blank lines so the
    masked text keeps its paragraphs.
    """
    toks = _tokens_with_spans(text)
    words = [t for t, _, _ in toks]
    marked = [False] * len(toks)
    grams: set[tuple[str, ...]] = set()
    extra: set[tuple[str, ...]] = set()
    for description in descriptions:
        g, e = _description_sequences(description)
        grams |= g
        extra.update(e)
    by_length: dict[int, set[tuple[str, ...]]] = {PHRASE_WORDS: grams} if grams else {}
    for seq in extra:
        by_length.setdefault(len(seq), set()).add(seq)
    for length, wanted in by_length.items():
        for i in range(len(words) - length + 1):
            if tuple(words[i : i + length]) in wanted:
                marked[i : i + length] = [True] * length
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(toks):
        if not marked[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(toks) and marked[j + 1]:
            j += 1
            if _BLANK_LINE.search(text, toks[j - 1][2], toks[j][1]):  # keep the paragraph break
                spans.append((toks[i][1], toks[j - 1][2]))
                i = j
        spans.append((toks[i][1], toks[j][2]))
        i = j + 1
    return spans


def mask_text(text: str, names: Mapping[str, str], descriptions: Sequence[str]) -> str:
    """``text`` with every description's repeated passages replaced by ``[…]`` and every name in
    ``names`` (real name → placeholder) replaced by its placeholder, longest name first."""
    wanted = [d for d in descriptions if d.strip()]
    masked = text
    # Again until nothing is found: masking can join words that were apart ("a, […], b"). Every
    # pass removes at least one word, so this ends.
    while spans := _phrase_spans(wanted, masked):
        out: list[str] = []
        pos = 0
        for start, end in spans:
            out.append(masked[pos:start])
            out.append(PHRASE_PLACEHOLDER)
            pos = end
        out.append(masked[pos:])
        masked = "".join(out)
    for name in sorted(names, key=len, reverse=True):
        masked = name_pattern(name).sub(names[name], masked)
    return masked


def _fit(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return text[:cut].rstrip() + "\n[… the rest of this body was left out]"


# --------------------------------------------------------------------------------------- requests


class ShownBody(Frozen):
    """A masked body as the model saw it. ``label`` is ``SKILL`` or ``RIVAL-n``."""

    label: str
    skill: str
    text: str


class GenerationRequest(Frozen):
    """One rendered request: everything the Messages API call needs, and what citations are checked on."""

    target: str
    system: str
    prompt: str
    bodies: tuple[ShownBody, ...]
    kinds: tuple[QueryKind, ...]
    per_skill: int
    max_tokens: int
    notes: tuple[str, ...] = ()
    """Why a kind was not asked for (e.g. no rival with a positive BM25 score)."""

    @property
    def digest(self) -> str:
        payload = json.dumps(
            [self.system, self.prompt, self.max_tokens], ensure_ascii=False, separators=(",", ":")
        )
        return "sha256:" + sha256_hex(payload)

    @property
    def rivals(self) -> tuple[str, ...]:
        return tuple(b.skill for b in self.bodies if b.label != TARGET_LABEL)

    def body(self, label: str) -> ShownBody | None:
        return next((b for b in self.bodies if b.label == label), None)


@lru_cache(maxsize=4)
def _environment(template_dir: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=True,
    )


def template_digest(template_dir: Path | None = None) -> str:
    """``sha256:<hex>`` over the name and text of every ``generate*.j2`` template."""
    files = sorted((template_dir or TEMPLATE_DIR).glob("generate*.j2"))
    payload = json.dumps([[f.name, f.read_text(encoding="utf-8")] for f in files], ensure_ascii=False)
    return "sha256:" + sha256_hex(payload)


def rivals_for(
    skills: Sequence[Skill], top: int, targets: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Each target's BM25 rivals (positive score only, best first; rivals without a body skipped)."""
    from skillreach.skills.bm25 import rivals

    wanted = set(targets) if targets is not None else None
    with_body = {s.name for s in skills if s.body.strip()}
    found = rivals(skills, top=top + len(skills) - len(with_body), only=wanted)
    return {r.name: [x.name for x in r.rivals if x.score > 0 and x.name in with_body][:top] for r in found}


def _shown(
    skill: Skill, label: str, names: Mapping[str, str], descriptions: Sequence[str], limit: int
) -> ShownBody:
    text = mask_text(skill.body.strip(), names, descriptions)
    text = _TAG.sub(lambda m: f"<{m.group(1)}skill-body", text)  # a body cannot close its own tag
    return ShownBody(label=label, skill=skill.name, text=_fit(text, limit))


def render_request(
    target: Skill, catalog: Catalog, rival_names: Sequence[str], params: GenerationParams
) -> GenerationRequest:
    """The request for one target (see the module docstring)."""
    rivals = [s for s in (catalog.get(n) for n in rival_names) if s is not None]
    kinds = list(params.kinds)
    notes: list[str] = []
    if QueryKind.neighbor_negative in kinds and not rivals:
        kinds.remove(QueryKind.neighbor_negative)
        notes.append("no neighbor_negative: no rival with a positive BM25 score and a body")
    if QueryKind.neighbor_negative not in kinds:
        rivals = []
    names = {target.name: f"[{TARGET_LABEL}]"}
    names.update({r.name: f"[RIVAL-{i}]" for i, r in enumerate(rivals, 1)})
    descriptions = [target.description, *(r.description for r in rivals)]
    bodies = [_shown(target, TARGET_LABEL, names, descriptions, MAX_TARGET_CHARS)]
    bodies += [_shown(r, f"RIVAL-{i}", names, descriptions, MAX_RIVAL_CHARS) for i, r in enumerate(rivals, 1)]
    others = sorted(n for n in catalog.names if n not in names)
    context = {
        "target": bodies[0],
        "rivals": bodies[1:],
        "kinds": [k.value for k in kinds],
        "per_skill": params.per_skill,
        "other_skills": others[:MAX_OTHER_NAMES],
        "more_skills": max(0, len(others) - MAX_OTHER_NAMES),
        "min_citation_words": MIN_CITATION_WORDS,
    }
    env = _environment(str(TEMPLATE_DIR))
    system = env.get_template(SYSTEM_TEMPLATE).render(**context)
    prompt = env.get_template(USER_TEMPLATE).render(**context)
    return GenerationRequest(
        target=target.name,
        system=system,
        prompt=prompt,
        bodies=tuple(bodies),
        kinds=tuple(kinds),
        per_skill=params.per_skill,
        max_tokens=params.max_tokens(len(kinds)),
        notes=tuple(notes),
    )


def plan_requests(
    catalog: Catalog,
    params: GenerationParams,
    *,
    targets: Sequence[str] | None = None,
    rivals: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[GenerationRequest], dict[str, str]]:
    """One request per target (name order), and the targets skipped with the reason.

    ``rivals`` (target → rival names, best first) defaults to :func:`rivals_for` over the catalog.
    """
    names = sorted(set(targets)) if targets is not None else sorted(catalog.names)
    unknown = [n for n in names if n not in catalog]
    if unknown:
        known = sorted(catalog.names)
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
        raise InputError(f"--targets: no skill named {unknown[0]!r} among the {len(known)} found ({shown})")
    if rivals is None:
        rivals = (
            rivals_for(list(catalog.skills), params.rivals, names)
            if QueryKind.neighbor_negative in params.kinds
            else {}
        )
    requests: list[GenerationRequest] = []
    skipped: dict[str, str] = {}
    for name in names:
        skill = catalog.get(name)
        assert skill is not None
        if not skill.body.strip():
            skipped[name] = "its SKILL.md has no body to ground queries in"
            continue
        requests.append(render_request(skill, catalog, list(rivals.get(name, []))[: params.rivals], params))
    return requests, skipped


# ------------------------------------------------------------------------------------------ replies


def _json_candidates(text: str) -> Iterable[str]:
    yield text
    for m in re.finditer(r"```(?:json|JSON)?\s*\n(.*?)```", text, re.DOTALL):
        yield m.group(1)
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            yield text[start : end + 1]


def parse_reply(text: str) -> list[dict[str, Any]]:
    """The drafts of a reply: ``{"queries": [...]}`` or a bare list, possibly fenced or with prose
    around it. Items that are not objects are kept (and dropped as malformed by :func:`assemble`)."""
    for candidate in _json_candidates(text.strip()):
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            for key in ("queries", "drafts", "requests", "items"):
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
        if isinstance(data, list):
            return [item if isinstance(item, dict) else {"_malformed": item} for item in data]
    snippet = " ".join(text.split())[:80]
    raise MalformedReply(f"the reply is not a JSON list of queries (starts: {snippet!r})")


# ------------------------------------------------------------------------------------------ results


class TargetResult(Frozen):
    """What one target's request(s) produced; ``error`` set means the target failed."""

    target: str
    drafts: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    resolved_model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    requests: int = 0
    request_digest: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


class LeakEntry(Frozen):
    query_id: str
    kind: str
    skill: str
    reasons: tuple[str, ...]
    text: str


class TargetReport(Frozen):
    target: str
    status: Literal["generated", "resumed", "failed", "skipped"]
    error: str | None = None
    requests: int = 0
    resolved_model: str | None = None
    rivals: tuple[str, ...] = ()
    drafts: int = 0
    kept: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


class GenerationReport(Frozen):
    schema_version: int = 1
    kind_counts: dict[str, int]
    dropped: dict[str, int]
    leaks: tuple[LeakEntry, ...]
    leaks_dropped: int
    near_duplicate_rule: str = NEAR_DUPLICATE_RULE
    targets: tuple[TargetReport, ...]
    usage: Usage = Field(default_factory=Usage)

    @property
    def failures(self) -> dict[str, str]:
        return {t.target: t.error or "" for t in self.targets if t.status == "failed"}

    @property
    def requests(self) -> int:
        return sum(t.requests for t in self.targets if t.status != "resumed")


class Assembly(Frozen):
    queries: tuple[Query, ...]
    report: GenerationReport


_CITATION_FOLD = str.maketrans("‘’“”*`", "''\"\"  ")


def _norm_citation(text: str) -> str:
    folded = _fold(text).translate(_CITATION_FOLD)
    return " ".join(folded.split())


def _strip_citation(text: str) -> str:
    text = text.strip()
    for _ in range(2):
        text = text.strip().strip("\"'“”‘’").strip()
        text = re.sub(r"^(?:\.\.\.|…)\s*|\s*(?:\.\.\.|…)$", "", text)
    return text


def _dedupe_key(text: str) -> str:
    return " ".join(_TOKEN.findall(_fold(text)))


class _NearDuplicates:
    """Exact all-pairs Jaccard ≥ t with prefix filtering (tokens ordered rarest first)."""

    def __init__(self, token_sets: Sequence[frozenset[str]], threshold: float) -> None:
        freq = Counter(t for s in token_sets for t in s)
        self.rank = {t: (n, t) for t, n in freq.items()}
        self.threshold = threshold
        self.kept: list[frozenset[str]] = []
        self.index: dict[str, list[int]] = {}

    def _prefix(self, tokens: frozenset[str]) -> list[str]:
        ordered = sorted(tokens, key=lambda t: self.rank.get(t, (0, t)))
        length = len(ordered) - math.ceil(self.threshold * len(ordered)) + 1
        return ordered[: max(length, 1)]

    def find(self, tokens: frozenset[str]) -> bool:
        if not tokens:
            return False
        seen: set[int] = set()
        for t in self._prefix(tokens):
            for i in self.index.get(t, ()):
                if i in seen:
                    continue
                seen.add(i)
                other = self.kept[i]
                if len(tokens & other) / len(tokens | other) >= self.threshold:
                    return True
        return False

    def add(self, tokens: frozenset[str]) -> None:
        if not tokens:
            return
        i = len(self.kept)
        self.kept.append(tokens)
        for t in self._prefix(tokens):
            self.index.setdefault(t, []).append(i)


def _field(item: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _draft_text(item: Mapping[str, Any]) -> str:
    text = _field(item, "text", "query", "request")
    context = _field(item, "context")
    if context and text and context not in text:
        return f"{context}\n\n{text}"
    return text


def _note(target: str, kind: QueryKind, expected: str | None, citation: str) -> str:
    quote = " ".join(citation.split())
    quote = quote if len(quote) <= 160 else quote[:157] + "..."
    if kind is QueryKind.neighbor_negative:
        return f'generated near {target}; belongs to {expected}; cites {expected}: "{quote}"'
    return f'generated for {target}; cites {target}: "{quote}"'


def assemble(
    catalog: Catalog,
    requests: Sequence[GenerationRequest],
    results: Mapping[str, TargetResult],
    *,
    skipped: Mapping[str, str] | None = None,
    resumed: Iterable[str] = (),
    drop_leaks: bool = False,
) -> Assembly:
    """Queries from every target's drafts, in target-name order, and the generation report."""
    from skillreach.skills.bm25 import tokenize

    resumed = set(resumed)
    dropped_all: Counter[str] = Counter()
    reports: dict[str, TargetReport] = {}
    pending: list[tuple[Query, str, frozenset[str], str]] = []  # query, source, tokens, dedupe key
    usage = Usage()

    for request in sorted(requests, key=lambda r: r.target):
        target = request.target
        result = results.get(target)
        rivals = request.rivals
        if result is None or not result.ok:
            reports[target] = TargetReport(
                target=target,
                status="failed",
                error=result.error if result is not None else "not generated",
                requests=result.requests if result is not None else 0,
                rivals=rivals,
                notes=request.notes,
            )
            if result is not None:
                usage = usage + result.usage
            continue
        usage = usage + result.usage
        dropped: Counter[str] = Counter()
        seen_per_kind: Counter[QueryKind] = Counter()  # numbers the ids: stable whatever is dropped
        valid_per_kind: Counter[QueryKind] = Counter()  # at most per_skill valid drafts per kind
        kept = 0
        target_body = request.body(TARGET_LABEL)
        original = catalog.get(target)
        for item in result.drafts:
            kind_value = item.get("kind")
            try:
                kind = QueryKind(str(kind_value).strip().lower()) if kind_value is not None else None
            except ValueError:
                kind = None
            text = _draft_text(item)
            if kind is None or kind not in request.kinds or not text:
                dropped["malformed"] += 1
                continue
            seen_per_kind[kind] += 1
            number = seen_per_kind[kind]
            if len(text) > MAX_QUERY_CHARS:
                dropped["too_long"] += 1
                continue
            if _PLACEHOLDER.search(text):
                dropped["placeholder"] += 1
                continue
            expected: str | None = target
            grounded = target_body
            grounded_skill = original
            if kind is QueryKind.neighbor_negative:
                label = _field(item, "rival").strip("[] ").upper()
                grounded = request.body(label) if label.startswith("RIVAL-") else None
                if grounded is None:
                    dropped["unknown_rival"] += 1
                    continue
                expected = grounded.skill
                grounded_skill = catalog.get(grounded.skill)
            elif kind is QueryKind.out_of_scope:
                expected = None
            citation = _strip_citation(_field(item, "citation", "quote", "evidence"))
            if len(_TOKEN.findall(citation)) < MIN_CITATION_WORDS:
                dropped["citation_missing"] += 1
                continue
            wanted = _norm_citation(citation)
            haystacks = [grounded.text if grounded is not None else ""]
            if grounded_skill is not None:
                haystacks.append(grounded_skill.body)
            if not any(wanted in _norm_citation(h) for h in haystacks):
                dropped["citation_not_found"] += 1
                continue
            if valid_per_kind[kind] >= request.per_skill:
                dropped["surplus"] += 1
                continue
            valid_per_kind[kind] += 1
            query = Query(
                id=f"gen-{target}-{KIND_CODES[kind]}-{number:02d}",
                text=text,
                expected_skill=expected,
                kind=kind,
                notes=_note(target, kind, expected, citation),
            )
            pending.append((query, target, frozenset(tokenize(text)), _dedupe_key(text)))
            kept += 1
        reports[target] = TargetReport(
            target=target,
            status="resumed" if target in resumed else "generated",
            requests=result.requests,
            resolved_model=result.resolved_model,
            rivals=rivals,
            drafts=len(result.drafts),
            kept=kept,
            dropped=dict(dropped),
            notes=request.notes,
        )

    # duplicates, across the whole set (first wins)
    near = _NearDuplicates([p[2] for p in pending], JACCARD_THRESHOLD)
    exact: set[str] = set()
    unique: list[tuple[Query, str]] = []
    dup_by_target: Counter[tuple[str, str]] = Counter()
    for query, source, tokens, key in pending:
        if key in exact:
            dup_by_target[(source, "duplicate")] += 1
            continue
        if near.find(tokens):
            dup_by_target[(source, "near_duplicate")] += 1
            continue
        exact.add(key)
        near.add(tokens)
        unique.append((query, source))

    leaks = leak_report(unique, catalog)
    leaks_dropped = 0
    if drop_leaks and leaks:
        leaking = {e.query_id for e in leaks}
        for query, source in unique:
            if query.id in leaking:
                dup_by_target[(source, "leak")] += 1
        leaks_dropped = sum(1 for q, _ in unique if q.id in leaking)
        unique = [(q, s) for q, s in unique if q.id not in leaking]

    for (source, reason), n in dup_by_target.items():
        rep = reports[source]
        counts = dict(rep.dropped)
        counts[reason] = counts.get(reason, 0) + n
        reports[source] = rep.model_copy(update={"dropped": counts, "kept": rep.kept - n})
    for name, why in (skipped or {}).items():
        reports[name] = TargetReport(target=name, status="skipped", error=why)
    for rep in reports.values():
        dropped_all.update(rep.dropped)

    queries = tuple(q for q, _ in unique)
    counts = {k.value: 0 for k in QueryKind}
    for q in queries:
        counts[q.kind.value] += 1
    report = GenerationReport(
        kind_counts=counts,
        dropped=dict(sorted(dropped_all.items())),
        leaks=tuple(leaks),
        leaks_dropped=leaks_dropped,
        targets=tuple(reports[n] for n in sorted(reports)),
        usage=usage,
    )
    return Assembly(queries=queries, report=report)


# --------------------------------------------------------------------------------------------- leaks


def description_only_tokens(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Per skill: tokens of its description that are in no skill's body and no other description."""
    from skillreach.skills.bm25 import tokenize

    in_bodies: set[str] = set()
    for s in catalog.skills:
        in_bodies.update(tokenize(s.body))
    desc = {s.name: set(tokenize(s.description)) for s in catalog.skills}
    seen_in: Counter[str] = Counter(t for tokens in desc.values() for t in tokens)
    return {
        name: frozenset(t for t in tokens if seen_in[t] == 1 and t not in in_bodies and not t.isdigit())
        for name, tokens in desc.items()
    }


def _name_words(name: str) -> list[str]:
    from skillreach.skills.bm25 import STOPWORDS

    return [w for w in (_fold(p) for p in re.split(r"[\W_]+", name)) if len(w) >= 3 and w not in STOPWORDS]


def leak_report(queries: Sequence[tuple[Query, str]], catalog: Catalog) -> list[LeakEntry]:
    """Queries that name their skill, or hold tokens only its description has.

    ``queries`` pairs each query with the target it was generated for; both the skill it is labelled
    with and that target are checked.
    """
    from skillreach.skills.bm25 import tokenize

    only = description_only_tokens(catalog)
    out: list[LeakEntry] = []
    for query, source in queries:
        tokens = set(tokenize(query.text))
        subjects = [s for s in dict.fromkeys([query.expected_skill, source]) if s is not None]
        for skill in subjects:
            reasons: list[str] = []
            if name_pattern(skill).search(query.text):
                reasons.append(f"names the skill {skill!r}")
            else:
                words = [
                    w for w in _name_words(skill) if w in tokens or f"{w}s" in tokens or f"{w}es" in tokens
                ]
                if words:
                    reasons.append("uses words of its name: " + ", ".join(words))
            own = sorted(tokens & only.get(skill, frozenset()))
            if own:
                reasons.append("tokens only its description has: " + ", ".join(own))
            if reasons:
                out.append(
                    LeakEntry(
                        query_id=query.id,
                        kind=query.kind.value,
                        skill=skill,
                        reasons=tuple(reasons),
                        text=query.text,
                    )
                )
    return out


# ---------------------------------------------------------------------------------------- provenance


def generation_provenance(
    report: GenerationReport,
    params: GenerationParams,
    *,
    catalog: Catalog,
    template_digest: str,
    results: Mapping[str, TargetResult],
) -> dict[str, Any]:
    """The provenance keys of a generated set (``seal`` adds created_at, tool_version and digests)."""
    resolved = sorted({r.resolved_model for r in results.values() if r.ok and r.resolved_model})
    return {
        "generator_model": ", ".join(resolved) if resolved else None,
        "requested_model": params.model,
        "template_digest": template_digest,
        "catalog_digest": catalog.digest,
        "temperature": params.temperature,
        "per_skill": params.per_skill,
        "kinds": [k.value for k in params.kinds],
        "rivals_per_target": params.rivals,
        "kind_counts": report.kind_counts,
        "targets": len(report.targets),
        "failed_targets": sorted(report.failures),
        "dropped": report.dropped,
        "leaks": len(report.leaks),
        "leaks_dropped": report.leaks_dropped,
        "near_duplicates": NEAR_DUPLICATE_RULE,
        "usage": report.usage.model_dump(),
    }
