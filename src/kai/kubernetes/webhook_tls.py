"""The webhooks' serving certificate, made by kai itself: no cert-manager needed.

The API server calls admission webhooks over TLS only, checking the serving certificate against the
`caBundle` of the webhook configuration. `kai run --webhook` therefore:
1. keeps a CA and a serving certificate for the names it is reached by (`--webhook-host`: the
   Service's DNS name, or an IP) in a Secret (`--webhook-secret`, type `kubernetes.io/tls` with
   `ca.crt`): the first replica creates it, the others read it, so every replica serves the same
   certificate; a Secret whose certificate lacks a name or expires within 30 days is replaced;
2. writes the CA into every webhook of its Validating- and MutatingWebhookConfiguration
   (`--webhook-configuration`) and keeps it there (a `helm upgrade` that renders an empty
   `caBundle` is repaired within `CA_RECHECK` seconds).
With `--webhook-cert-dir` the certificate is the user's (`tls.crt`, `tls.key`) and none of this
happens. Certificates are ECDSA P-256, the CA valid 10 years, the serving certificate 2.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import logging
from collections.abc import Sequence
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kai.kubernetes import client as kc
from kai.kubernetes.resources import ApiResource

log = logging.getLogger(__name__)

SECRETS = ApiResource(group="", version="v1", plural="secrets", kind="Secret", namespaced=True)
VALIDATING = ApiResource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="validatingwebhookconfigurations",
    kind="ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING = ApiResource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="mutatingwebhookconfigurations",
    kind="MutatingWebhookConfiguration",
    namespaced=False,
)
RENEW_BEFORE = datetime.timedelta(days=30)
CA_RECHECK = 30.0  # seconds between checks that the webhook configurations carry the CA


class ServingCertificate(msgspec.Struct, frozen=True, kw_only=True):
    ca: bytes  # PEM
    cert: bytes  # PEM
    key: bytes  # PEM


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate(hosts: Sequence[str], *, now: datetime.datetime | None = None) -> ServingCertificate:
    """A new CA and a serving certificate it signs for `hosts` (DNS names or IP addresses)."""
    now = now or datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kai-webhook-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=730))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(
        ca=ca.public_bytes(serialization.Encoding.PEM),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def usable(found: ServingCertificate, hosts: Sequence[str], *, now: datetime.datetime | None = None) -> bool:
    """Whether a certificate serves every one of `hosts` for at least `RENEW_BEFORE` more."""
    now = now or datetime.datetime.now(datetime.UTC)
    try:
        cert = x509.load_pem_x509_certificate(found.cert)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in names.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in names.get_values_for_type(x509.IPAddress)}
    return set(hosts) <= have and cert.not_valid_after_utc - now > RENEW_BEFORE


def _from_secret(secret: dict[str, Any]) -> ServingCertificate | None:
    data = secret.get("data") or {}
    try:
        return ServingCertificate(
            ca=base64.b64decode(data["ca.crt"]),
            cert=base64.b64decode(data["tls.crt"]),
            key=base64.b64decode(data["tls.key"]),
        )
    except (KeyError, ValueError):
        return None


def _secret(namespace: str, name: str, found: ServingCertificate) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "kai"}},
        "type": "kubernetes.io/tls",
        "data": {
            "ca.crt": base64.b64encode(found.ca).decode(),
            "tls.crt": base64.b64encode(found.cert).decode(),
            "tls.key": base64.b64encode(found.key).decode(),
        },
    }


async def ensure_certificate(
    client: kc.KubeClient, namespace: str, name: str, hosts: Sequence[str]
) -> ServingCertificate:
    """The serving certificate kept in the Secret `namespace/name`, made (or renewed) if need be."""
    for _ in range(5):
        try:
            secret = await client.request("GET", SECRETS.path(namespace=namespace, name=name))
        except kc.ApiError as err:
            if err.code != 404:
                raise
            secret = None
        found = _from_secret(secret) if secret is not None else None
        if found is not None and usable(found, hosts):
            return found
        fresh = generate(hosts)
        body = _secret(namespace, name, fresh)
        try:
            if secret is None:
                await client.request("POST", SECRETS.path(namespace=namespace), body=body)
            else:
                body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                await client.request("PUT", SECRETS.path(namespace=namespace, name=name), body=body)
        except kc.ApiError as err:
            if err.code == 409:
                continue  # another replica wrote it first: use theirs
            raise
        log.info("wrote the webhook serving certificate for %s to Secret %s/%s", ", ".join(hosts), namespace, name)
        return fresh
    raise RuntimeError(f"Secret {namespace}/{name} kept changing while kai wrote its webhook certificate")


async def inject_ca(client: kc.KubeClient, configuration: str, ca: bytes) -> int:
    """Put the CA into every webhook of the named configurations; returns how many were changed."""
    bundle = base64.b64encode(ca).decode()
    changed = 0
    for resource in (VALIDATING, MUTATING):
        for _ in range(5):
            try:
                config = await client.request("GET", resource.path(name=configuration))
            except kc.ApiError as err:
                if err.code == 404:
                    break  # this kind of webhook is not installed
                raise
            webhooks = config.get("webhooks") or []
            stale = [w for w in webhooks if (w.get("clientConfig") or {}).get("caBundle") != bundle]
            if not stale:
                break
            for webhook in stale:
                webhook.setdefault("clientConfig", {})["caBundle"] = bundle
            try:
                await client.request("PUT", resource.path(name=configuration), body=config)
            except kc.ApiError as err:
                if err.code == 409:
                    continue
                raise
            changed += len(stale)
            log.info("set the CA of %d webhook(s) of %s %s", len(stale), resource.kind, configuration)
            break
    return changed


async def keep_ca(client: kc.KubeClient, configuration: str, ca: bytes, stop: asyncio.Event) -> None:
    """Keep the CA in the webhook configurations until `stop`."""
    while not stop.is_set():
        try:
            await inject_ca(client, configuration, ca)
        except (kc.ApiError, kc.ApiUnreachable) as err:
            log.warning("checking the CA of webhook configuration %s failed: %s", configuration, err)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=CA_RECHECK)
