"""Where `kai run` finds its cluster credentials, in kubectl's order, with errors a user can act on.

Resolution (the first that applies wins):

1. `--kubeconfig PATH` (the file must exist and parse);
2. `$KUBECONFIG`, a `:`-separated list of files merged as kubectl merges them (the first file that
   defines a cluster, user, context or `current-context` wins; missing files are skipped);
3. the in-cluster service account (`$KUBERNETES_SERVICE_HOST` and the mounted token), unless a
   `--context` asks for a kubeconfig context;
4. `~/.kube/config`.

`--context NAME` picks a context of the kubeconfig instead of its `current-context`. Parsing and
authentication are lightkube's (`lightkube.config`); this module adds the search order and turns
every failure into a `KubeConfigError` that names the file, the entry and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml
from lightkube.config import kubeconfig as lk_kubeconfig
from lightkube.config import models as lk_models

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = Path("~/.kube/config")

# kubeconfig fields that hold file paths, made absolute against the file that names them
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


class KubeConfigError(Exception):
    """The cluster credentials cannot be used. The message names the source and says what to fix."""


def load(
    *,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> lk_kubeconfig.SingleConfig:
    """Resolve the connection settings for one cluster (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    if kubeconfig is not None:
        return _select(_read_files([Path(kubeconfig)], explicit=True), context)
    listed = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return _select(_read_files(listed, explicit=False), context)
    if context is None and env.get("KUBERNETES_SERVICE_HOST") and (service_account_dir / "token").is_file():
        return _in_cluster(env, service_account_dir)
    default = DEFAULT_KUBECONFIG.expanduser()
    if default.is_file():
        return _select(_read_files([default], explicit=True), context)
    raise KubeConfigError(
        "no Kubernetes credentials found: no --kubeconfig, no KUBECONFIG, not running in a pod with a "
        f"service account, and no {DEFAULT_KUBECONFIG}. To fix: pass --kubeconfig PATH or set KUBECONFIG"
    )


def _in_cluster(env: Mapping[str, str], account: Path) -> lk_kubeconfig.SingleConfig:
    host, port = env["KUBERNETES_SERVICE_HOST"], env.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    ca = account / "ca.crt"
    namespace_file = account / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else None
    config = lk_kubeconfig.KubeConfig.from_one(
        cluster=lk_models.Cluster(server=f"https://{host}:{port}", certificate_auth=str(ca) if ca.is_file() else None),
        user=lk_models.User(token_file=str(account / "token")),
        context_name="in-cluster",
        namespace=namespace,
    )
    selected = config.get()
    assert selected is not None
    return selected


class _Merged:
    """kubeconfig documents merged first-wins, remembering which file each entry came from."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, tuple[Path, dict[str, Any]]]] = {"clusters": {}, "users": {}, "contexts": {}}
        self.current_context: tuple[Path, str] | None = None
        self.files: list[Path] = []

    def add(self, path: Path, doc: Any) -> None:
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise KubeConfigError(f"kubeconfig {path}: expected a mapping at the top, got {type(doc).__name__}")
        self.files.append(path)
        for key, inner, paths in (
            ("clusters", "cluster", _CLUSTER_PATHS),
            ("users", "user", _USER_PATHS),
            ("contexts", "context", ()),
        ):
            items = doc.get(key)
            items = [] if items is None else items
            if not isinstance(items, list):
                raise KubeConfigError(f"kubeconfig {path}: {key}: expected a list, got {type(items).__name__}")
            for index, item in enumerate(items):
                where = f"kubeconfig {path}: {key}[{index}]"
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise KubeConfigError(f"{where}: each entry needs a string 'name' and a '{inner}' mapping")
                body = item.get(inner) or {}
                if not isinstance(body, dict):
                    raise KubeConfigError(f"{where} ({item['name']}): '{inner}' must be a mapping")
                body = dict(body)
                for field in paths:
                    value = body.get(field)
                    if isinstance(value, str) and value and not Path(value).is_absolute():
                        body[field] = str(path.parent / value)
                self.entries[key].setdefault(item["name"], (path, body))
        current = doc.get("current-context")
        if current and self.current_context is None:
            if not isinstance(current, str):
                raise KubeConfigError(f"kubeconfig {path}: current-context must be a string")
            self.current_context = (path, current)


def _read_files(paths: list[Path], *, explicit: bool) -> _Merged:
    merged = _Merged()
    for raw in paths:
        path = raw.expanduser()
        try:
            text = path.read_text()
        except FileNotFoundError:
            if explicit:
                raise KubeConfigError(f"kubeconfig {path}: no such file") from None
            continue
        except OSError as err:
            raise KubeConfigError(f"kubeconfig {path}: cannot read it: {err.strerror or err}") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise KubeConfigError(f"kubeconfig {path}: not valid YAML: {err}") from None
        merged.add(path, doc)
    if not merged.files:
        listed = ", ".join(str(p) for p in paths)
        raise KubeConfigError(f"KUBECONFIG names no existing file ({listed})")
    return merged


def _select(merged: _Merged, context: str | None) -> lk_kubeconfig.SingleConfig:
    sources = ", ".join(str(p) for p in merged.files)
    if context is None:
        if merged.current_context is None:
            raise KubeConfigError(f"kubeconfig {sources}: no current-context set. To fix: pass --context NAME")
        context = merged.current_context[1]
    if context not in merged.entries["contexts"]:
        known = ", ".join(sorted(merged.entries["contexts"])) or "none"
        raise KubeConfigError(f"kubeconfig {sources}: context {context!r} not found (contexts: {known})")
    ctx_path, ctx_body = merged.entries["contexts"][context]
    where = f"kubeconfig {ctx_path}: context {context!r}"
    cluster_name = ctx_body.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise KubeConfigError(f"{where}: field 'cluster' is missing")
    if cluster_name not in merged.entries["clusters"]:
        raise KubeConfigError(f"{where}: cluster {cluster_name!r} is not defined")
    user_name = ctx_body.get("user")
    if user_name and user_name not in merged.entries["users"]:
        raise KubeConfigError(f"{where}: user {user_name!r} is not defined")
    cluster_path, cluster_body = merged.entries["clusters"][cluster_name]
    if not isinstance(cluster_body.get("server"), str) or not cluster_body["server"]:
        raise KubeConfigError(f"kubeconfig {cluster_path}: cluster {cluster_name!r}: field 'server' is missing")
    try:
        cluster = msgspec.convert(cluster_body, lk_models.Cluster)
    except msgspec.ValidationError as err:
        raise KubeConfigError(f"kubeconfig {cluster_path}: cluster {cluster_name!r}: {err}") from None
    user: lk_models.User | None = None
    if user_name:
        user_path, user_body = merged.entries["users"][user_name]
        try:
            user = msgspec.convert(user_body, lk_models.User)
        except msgspec.ValidationError as err:
            raise KubeConfigError(f"kubeconfig {user_path}: user {user_name!r}: {err}") from None
    try:
        ctx = msgspec.convert(ctx_body, lk_models.Context)
    except msgspec.ValidationError as err:
        raise KubeConfigError(f"{where}: {err}") from None
    return lk_kubeconfig.SingleConfig(context_name=context, context=ctx, cluster=cluster, user=user, fname=ctx_path)


def describe(config: lk_kubeconfig.SingleConfig) -> str:
    """One line naming where the credentials came from, for logs and error messages."""
    if config.fname is None:
        return f"{config.cluster.server} (in-cluster service account)"
    return f"{config.cluster.server} (context {config.context_name!r} of {config.fname})"
