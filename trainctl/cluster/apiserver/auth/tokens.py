"""ServiceAccount tokens: signed JWTs with kube-apiserver's claims, issued and checked here.

A token names its ServiceAccount (``sub: system:serviceaccount:<ns>:<name>`` and the private
``kubernetes.io`` claim with the account's and, when bound, the pod's name and uid), its
issuer and audiences, and when it expires. It is signed with the server's key
(``pki.service_account_key``, ES256), so the server alone can make one and anyone holding the
public key could check one. This module only signs and checks signatures and times; whether
the account (and the bound pod) still exist is the authenticator's question (``authn``).

As kube-apiserver does with ``--service-account-extend-token-expiration`` (on by default), a
token bound to a pod that asks for the kubelet's 3607 seconds is issued for a year and
carries ``warnafter`` at the hour: the local kubelet writes a pod's token once.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

Obj = dict[str, Any]

ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = (ISSUER,)
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32  # kube-apiserver validates no longer lifetime (about 136 years)
KUBELET_EXPIRATION = 3607  # what a kubelet asks for its pods' projected tokens
EXTENDED_EXPIRATION = 365 * 24 * 3600
_ALGORITHM = "ES256"


@dataclass(frozen=True)
class Issued:
    token: str
    expires: int  # seconds since the epoch


class TokenIssuer:
    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self._key = key
        self._public = key.public_key()
        der = self._public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.key_id = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")

    def issue(self, account: Obj, now: int, *, audiences: list[str] | None = None,
              expiration_seconds: int = DEFAULT_EXPIRATION, pod: Obj | None = None) -> Issued:
        """A token for ``account`` (a ServiceAccount), bound to ``pod`` when given."""
        meta = account["metadata"]
        private: Obj = {"namespace": meta["namespace"],
                        "serviceaccount": {"name": meta["name"], "uid": meta.get("uid", "")}}
        lifetime = expiration_seconds
        claims: Obj = {}
        if pod is not None:
            private["pod"] = {"name": pod["metadata"]["name"], "uid": pod["metadata"].get("uid", "")}
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                private["node"] = {"name": node}
            if expiration_seconds == KUBELET_EXPIRATION:
                lifetime = EXTENDED_EXPIRATION
                private["warnafter"] = now + expiration_seconds
        claims.update({"aud": list(audiences or API_AUDIENCES), "exp": now + lifetime, "iat": now, "nbf": now,
                       "iss": ISSUER, "jti": str(uuid.uuid4()), "kubernetes.io": private,
                       "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}"})
        token = jwt.encode(claims, self._key, algorithm=_ALGORITHM, headers={"kid": self.key_id})
        return Issued(token, now + lifetime)

    def verify(self, token: str, audiences: tuple[str, ...] = API_AUDIENCES) -> Obj | None:
        """The claims of a token this server signed for one of ``audiences``, still valid
        (not expired, not before its time); None for anything else."""
        try:
            claims: Obj = jwt.decode(token, self._public, algorithms=[_ALGORITHM], audience=list(audiences),
                                     issuer=ISSUER, options={"require": ["exp", "iss", "aud", "sub"]})
        except jwt.PyJWTError:
            return None
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict) or not isinstance(private.get("serviceaccount"), dict):
            return None
        return claims


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2
