"""What a read returns: one object as its version shows it, or one page of a list.

A list is served in (namespace, name) order; a page that stops at ``limit`` carries a
``continue`` token naming the last key served and how many matching objects remain, as
kube-apiserver's paging does.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import orjson

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.storage import scale_subresource
from trainctl.cluster.apiserver.storage.store import Store

Obj = dict[str, Any]


class Reads:
    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.read(rtype.storage_key, namespace or "", name)
        if obj is None:
            raise errors.not_found(rtype.plural, rtype.group, name)
        return rtype.view(obj)

    def list(self, rtype: ResourceType, namespace: str | None, matches: Callable[[Obj], bool],
             limit: int = 0, continue_token: str | None = None) -> tuple[list[Obj], Obj]:
        """Matching objects in (namespace, name) order and the list metadata."""
        objects = self.store.read_list(rtype.storage_key, namespace)
        start: tuple[str, str] | None = None
        if continue_token:
            try:
                decoded = orjson.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start = (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, IndexError, TypeError):
                raise errors.bad_request("continue key is not valid: illegal base64 data") from None
        items: list[Obj] = []
        remaining = 0
        last: tuple[str, str] | None = None
        for obj in objects:
            key = (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
            if start is not None and key <= start:
                continue
            if not matches(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(rtype.view(obj))
            last = key
        meta: Obj = {"resourceVersion": str(self.store.committed_rv)}
        if remaining and last is not None:
            token = {"rv": self.store.committed_rv, "start": list(last)}
            meta["continue"] = base64.urlsafe_b64encode(orjson.dumps(token)).decode()
            meta["remainingItemCount"] = remaining
        return items, meta

    def get_scale(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        return scale_subresource.scale_of(rtype, self.get(rtype, namespace, name))
