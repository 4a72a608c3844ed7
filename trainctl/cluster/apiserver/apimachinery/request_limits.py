"""The limits every write must keep: request size, nesting depth and stored-object size.

kube-apiserver refuses request bodies over 3 MiB (413) and etcd refuses objects over
1.5 MiB; its decoders refuse input nested deeper than they can handle. This server keeps
the same kind of limits, for the same reason: one object must never be able to break the
server for others. Depth matters most here: a stored object nested deeper than orjson can
serialise (254 levels, less the few levels a watch event, list or Table adds) would make
every read, list and watch of its kind fail. So bodies are refused when they are decoded
(``decode_json``, ``decode_yaml``) and every new state again just before it is stored
(``check_object``, called from ``admission``).

Decoding a body that may take long (any YAML, JSON past ``INLINE_JSON_BYTES``) runs off the
event loop (``off_loop``), on a small pool of threads, so that no body, whatever its size or
shape, holds up the other clients' requests while it is parsed. The thread alone would not
be enough (a parse in Python holds the GIL): the decoders' own limits keep the parse itself
short (``MAX_YAML_NODES`` counts YAML nodes with aliases expanded), and the thread lets the
loop take its turns meanwhile. Small JSON bodies, whose decoding in C takes microseconds, are
decoded in place.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from trainctl.cluster.apiserver.apimachinery import errors

Obj = dict[str, Any]

MAX_REQUEST_BYTES = 3 * 1024 * 1024  # kube-apiserver's limit on a request body
MAX_OBJECT_BYTES = 1536 * 1024  # etcd's default request limit, hence the largest object kube stores
MAX_DEPTH = 100  # JSON nesting levels of a body or an object (an object itself is level 1)
# Nodes one YAML document may stand for, aliases expanded (a "billion laughs" guard, and a
# bound on the time a body of any shape takes to load: PyYAML builds each node in Python).
MAX_YAML_NODES = 100_000
INLINE_JSON_BYTES = 64 * 1024  # JSON bodies up to this size are decoded on the loop itself
DECODERS = 2  # threads decoding bodies; more bodies wait their turn, off the loop

_decoders = concurrent.futures.ThreadPoolExecutor(max_workers=DECODERS, thread_name_prefix="body-decoder")
T = TypeVar("T")


async def off_loop(decode: Callable[..., T], *args: Any) -> T:
    """``decode(*args)`` on a decoder thread, the loop serving other requests meanwhile."""
    return await asyncio.get_running_loop().run_in_executor(_decoders, decode, *args)


def request_too_large(size: int | None = None) -> errors.ApiError:
    said = f" ({size} bytes)" if size is not None else ""
    return errors.ApiError(413, "RequestEntityTooLarge",
                           f"Request entity too large{said}: limit is {MAX_REQUEST_BYTES}")


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of JSON data (a scalar is 0, ``{}`` is 1). It does not descend
    more than ``limit`` + 1 levels (so it cannot exhaust the stack): any depth past
    ``limit`` is reported as ``limit`` + 1 or more."""
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return 0
    if limit < 0:
        return 1
    deepest = 0
    for child in children:
        if isinstance(child, (dict, list)):
            depth = depth_of(child, limit - 1)
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
    return deepest + 1


def _too_deep(what: str) -> errors.ApiError:
    return errors.bad_request(f"{what} is nested too deeply: the limit is {MAX_DEPTH} levels")


def check_depth(value: Any, what: str = "the request body") -> Any:
    if depth_of(value) > MAX_DEPTH:
        raise _too_deep(what)
    return value


def decode_json(raw: bytes, what: str = "the request body") -> Any:
    """JSON bytes as data; raises ValueError for malformed JSON, ApiError for too deep."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise _too_deep(what) from None
        raise
    return check_depth(value, what)


try:  # libyaml's parser: events at C speed; composition stays in Python, where it is counted
    from yaml._yaml import CParser as _EventParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventParser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: Any) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


class _BoundedLoader(Composer, _EventParser, SafeConstructor, Resolver):
    """A safe loader counting, as it composes, every node the document stands for with
    its aliases expanded, and giving up as soon as that passes ``MAX_YAML_NODES`` or the
    nesting passes ``MAX_DEPTH``.

    Counting alias events alone is not enough: seven levels of ten aliases each are 70
    aliases standing for ten million nodes, which every later walk of the data (depth
    check, validation, serialisation) would visit. Each anchored node remembers how many
    nodes it stands for, so an alias costs its expansion without being walked.
    """

    def __init__(self, stream: Any) -> None:
        _EventParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._nodes = 0
        self._expanded: dict[int, int] = {}  # id(anchored node) -> nodes it stands for

    def _count(self, nodes: int) -> None:
        self._nodes += nodes
        if self._nodes > MAX_YAML_NODES:
            raise errors.bad_request(
                f"the YAML document stands for more than {MAX_YAML_NODES} nodes once its aliases are expanded")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._expanded:
                raise errors.bad_request("the YAML document has an alias to a node that contains it")
            self._count(self._expanded[id(node)])
            return node
        anchor: str | None = getattr(self.peek_event(), "anchor", None)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep("the request body")
            before = self._nodes
            self._count(1)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if anchor is not None:
            self._expanded[id(node)] = self._nodes - before
        return node


def decode_yaml(raw: bytes | str) -> Any:
    """A YAML document as data; raises yaml.YAMLError for malformed YAML, ApiError for too
    deep or too many nodes. Its cost is bounded by ``MAX_YAML_NODES``, whatever its size
    or shape."""
    loader = _BoundedLoader(raw)
    try:
        return check_depth(loader.get_single_data())
    except yaml.MarkedYAMLError as exc:
        if exc.problem == "exceeded maximum nesting depth":  # libyaml's own limit, past ours
            raise _too_deep("the request body") from None
        raise
    finally:
        loader.dispose()


def check_object(kind: str, group: str, obj: Obj) -> None:
    """Refuse a new state of an object that is too deep or too large to store."""
    name = obj.get("metadata", {}).get("name", "")
    if depth_of(obj) > MAX_DEPTH:
        raise errors.invalid(kind, group, name, [errors.Cause(
            "", "FieldValueInvalid", f"object is nested too deeply: the limit is {MAX_DEPTH} levels")])
    size = len(orjson.dumps(obj))
    if size > MAX_OBJECT_BYTES:
        raise errors.ApiError(413, "RequestEntityTooLarge",
                              f"object is too large: {size} bytes, the limit is {MAX_OBJECT_BYTES}",
                              {"name": name, "group": group, "kind": kind})
