"""Resource paths resolve to the route kube-apiserver would serve them with, or to its 404."""

from __future__ import annotations

import pytest

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry
from trainctl.cluster.apiserver.serving import routes
from trainctl.cluster.apiserver.serving.routes import COLLECTION, OBJECT, ROUTES, Handlers


def target(path: str) -> routes.Target:
    return routes.parse(Registry(), [p for p in path.split("/") if p])


@pytest.mark.parametrize(("method", "path", "verb", "handler"), [
    ("GET", "/api/v1/pods", "LIST", Handlers.list),
    ("GET", "/api/v1/namespaces/team/pods", "LIST", Handlers.list),
    ("POST", "/api/v1/namespaces/team/pods", "CREATE", Handlers.create),
    ("DELETE", "/api/v1/namespaces/team/configmaps", "DELETECOLLECTION", Handlers.delete_collection),
    ("GET", "/api/v1/namespaces/team/pods/p", "GET", Handlers.get),
    ("PATCH", "/api/v1/namespaces/team/pods/p", "PATCH", Handlers.patch),
    # status and finalize have no handlers of their own: the object's serve them
    ("PUT", "/api/v1/namespaces/team/pods/p/status", "UPDATE", Handlers.update),
    ("PUT", "/api/v1/namespaces/team/finalize", "UPDATE", Handlers.update),
    ("GET", "/api/v1/namespaces/team/pods/p/log", "CONNECT", Handlers.log),
    ("POST", "/api/v1/namespaces/team/pods/p/exec", "CONNECT", Handlers.connect),
    ("POST", "/api/v1/namespaces/team/pods/p/eviction", "CREATE", Handlers.evict),
    ("POST", "/api/v1/namespaces/team/serviceaccounts/default/token", "CREATE", Handlers.request_token),
])
def test_a_method_on_a_target_has_one_route(method: str, path: str, verb: str, handler: object) -> None:
    route = ROUTES[(method, target(path).scope)]
    assert (route.verb, route.handler) == (verb, handler)


def test_the_namespace_finalize_path_names_the_namespace_not_a_collection_inside_it() -> None:
    finalize = target("/api/v1/namespaces/team/finalize")
    assert (finalize.rtype.plural, finalize.namespace, finalize.name, finalize.subresource) == ("namespaces", None, "team", "finalize")
    assert finalize.scope == OBJECT


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/api/v1/namespaces/team/pods"),  # no update of a whole collection
    ("POST", "/api/v1/namespaces/team/pods/p"),
    ("GET", "/api/v1/namespaces/team/pods/p/binding"),
    ("PUT", "/api/v1/namespaces/team/pods/p/log"),
    ("DELETE", "/api/v1/namespaces/team/serviceaccounts/default/token"),
])
def test_a_method_without_a_route_has_none(method: str, path: str) -> None:
    assert (method, target(path).scope) not in ROUTES


@pytest.mark.parametrize("path", [
    "/api/v1/widgets",
    "/api/v1/namespaces/team/nodes/n1",  # a cluster-scoped kind inside a namespace
    "/api/v1/namespaces/team/configmaps/c/log",  # a subresource its kind does not have
    "/api/v1/namespaces/team/pods/p/log/more",
    "/apis/batch",
])
def test_what_is_not_served_is_404(path: str) -> None:
    with pytest.raises(errors.ApiError) as raised:
        target(path)
    assert raised.value.code == 404


def test_collections_are_their_own_scope() -> None:
    assert target("/api/v1/namespaces/team/pods").scope == COLLECTION
