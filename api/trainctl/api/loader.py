"""From text to jobs: multi-document YAML in, plain dicts and typed jobs out.

Bad input is the normal case here (hand-written YAML, objects from other tools), so nothing
in this module lets an exception other than ``DocumentsInvalid`` or ``JobInvalid`` escape,
and every problem is one line a user can act on.

YAML is read the way Kubernetes reads it: timestamps stay strings (the API is JSON, so
``creationTimestamp: 2024-01-01T00:00:00Z`` must round-trip as text) and a key written twice
in one mapping is an error instead of silently keeping the last value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, cast

import yaml
from pydantic import ValidationError

from trainctl.api import kinds
from trainctl.api.common import Job
from trainctl.api.errors import FieldError, JobInvalid, from_validation_error, json_type, map_fields, show, supported

# The map fields of every registered kind's model, computed once per set of models.
_map_fields = lru_cache(maxsize=8)(map_fields)


class _KubernetesYAMLLoader(yaml.SafeLoader):
    """SafeLoader without timestamp resolution and with duplicate-key detection."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key; construct_mapping reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {show(key)}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class Document:
    """One YAML document of a stream: its object, or why it has none."""

    index: int  # 1-based position in the stream
    line: int  # 1-based line where the document starts
    obj: Optional[dict[str, Any]] = None
    error: Optional[str] = None

    @property
    def where(self) -> str:
        return f"document {self.index} (line {self.line})"


class DocumentsInvalid(ValueError):
    """Some documents of a stream could not be read; ``problems`` has one line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# A line that starts a new document: '---' alone or followed by blanks and content.
_DOCUMENT_START = re.compile(r"^---(?:[ \t].*)?$")


def _split(text: str) -> list[tuple[int, str]]:
    """Documents as (first line, text); each is parsed alone so one bad document spares the rest."""
    chunks: list[tuple[int, str]] = []
    start, lines = 1, list[str]()
    for number, line in enumerate(text.splitlines(), start=1):
        if _DOCUMENT_START.match(line):
            chunks.append((start, "\n".join(lines)))
            start, lines = number, [line]
        else:
            lines.append(line)
    chunks.append((start, "\n".join(lines)))
    return chunks


def _yaml_problem(exc: yaml.YAMLError, first_line: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = f"{context}: {problem}" if context and "duplicate key" not in problem else problem
    if mark is not None:
        return f"line {first_line + mark.line}, column {mark.column + 1}: {text}"
    return text


class _DuplicateKey(ValueError):
    pass


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(f"duplicate key {show(key)}")
        obj[key] = value
    return obj


def _read_json(text: str) -> Optional[list[Document]]:
    """A JSON document (which may be indented with tabs, unlike YAML), or None if it is not JSON."""
    try:
        obj = json.loads(text, object_pairs_hook=_json_object)
    except _DuplicateKey as exc:
        return [Document(1, 1, error=str(exc))]
    except ValueError:
        return None  # not JSON: YAML's flow style also starts with { or [
    except RecursionError:
        return [Document(1, 1, error="nested too deeply")]
    if not isinstance(obj, dict):
        return [Document(1, 1, error=f"expected a Kubernetes object (a mapping), got {json_type(obj)} {show(obj)}")]
    return [Document(1, 1, obj=obj)]


def read_documents(text: str) -> list[Document]:
    """Every non-empty document of a YAML stream (or one JSON object), good or bad, in order."""
    if text.lstrip().startswith(("{", "[")):
        documents = _read_json(text)
        if documents is not None:
            return documents
    documents = []
    for first_line, chunk in _split(text):
        try:
            obj = yaml.load(chunk, Loader=_KubernetesYAMLLoader)
            acyclic = _acyclic(obj)
        except yaml.YAMLError as exc:
            documents.append(Document(len(documents) + 1, first_line, error=_yaml_problem(exc, first_line)))
            continue
        except RecursionError:
            documents.append(Document(len(documents) + 1, first_line, error="nested too deeply"))
            continue
        if obj is None:
            continue  # empty document, e.g. a leading '---'
        if not acyclic:
            error = "an alias (*name) refers to a node that contains it; JSON cannot hold a cycle"
            documents.append(Document(len(documents) + 1, first_line, error=error))
            continue
        if not isinstance(obj, dict):
            error = f"expected a Kubernetes object (a mapping), got {json_type(obj)} {show(obj)}"
            documents.append(Document(len(documents) + 1, first_line, error=error))
            continue
        documents.append(Document(len(documents) + 1, first_line, obj=obj))
    return documents


def _acyclic(obj: Any, ancestors: Optional[set[int]] = None) -> bool:
    """False when YAML anchors made a container contain itself."""
    if not isinstance(obj, (dict, list)):
        return True
    ancestors = ancestors if ancestors is not None else set()
    if id(obj) in ancestors:
        return False
    ancestors.add(id(obj))
    children = obj.values() if isinstance(obj, dict) else obj
    ok = all(_acyclic(child, ancestors) for child in children)
    ancestors.discard(id(obj))
    return ok


def load_documents(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream; raises ``DocumentsInvalid`` listing each bad one."""
    documents = read_documents(text)
    problems = [f"{d.where}: {d.error}" for d in documents if d.error is not None]
    if problems:
        raise DocumentsInvalid(problems)
    return [d.obj for d in documents if d.obj is not None]


def job_kind(obj: Any) -> tuple[Optional[kinds.JobKind], list[FieldError]]:
    """Which kind an object claims to be, or why it is not a training job."""
    if not isinstance(obj, dict):
        return None, [FieldError("", "TypeInvalid", f"a job must be an object, not {json_type(obj)} {show(obj)}")]
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind is None:
        return None, [FieldError("kind", "Required", "Required value")]
    found = kinds.find(kind)
    if found is None:
        return None, [FieldError("kind", "NotSupported", f"unsupported value {show(kind)}; {supported(kinds.BY_KIND)}")]
    expected = found.api_version
    if api_version is None:
        return None, [FieldError("apiVersion", "Required", "Required value")]
    if api_version != expected:
        return None, [FieldError("apiVersion", "NotSupported", f"unsupported value {show(api_version)} for {kind}; {supported([expected])}")]
    return found, []


def parse_structure(obj: Any) -> tuple[Optional[Job], list[FieldError]]:
    """The typed job and no errors, or no job and every type error found."""
    found, errors = job_kind(obj)
    if found is None:
        return None, errors
    model = found.model
    try:
        return cast(Job, model.model_validate(obj)), []
    except ValidationError as exc:
        return None, from_validation_error(exc, _map_fields(*(k.model for k in kinds.KINDS)))
    except (RecursionError, TypeError, ValueError) as exc:  # e.g. a self-referencing YAML alias
        return None, [FieldError("", "Invalid", f"cannot be read as a {model.__name__}: {exc}")]


def parse_job(obj: Any) -> Job:
    """A training job (``PyTorchJob``, ``MSJob``, …) from its wire dict; raises ``JobInvalid`` with every type error.

    This checks shapes and types only; ``trainctl.api.validation.validate`` applies the rules.
    """
    job, errors = parse_structure(obj)
    if job is None:
        raise JobInvalid(errors)
    return job
