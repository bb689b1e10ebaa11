"""The Kubernetes recipe (deploy/k8s/): valid against the Kubernetes schemas, and its parts fit.

The schemas come with the `kubernetes-validate` package (requirements-dev.txt); the tests block
the network while validating, so they show it works offline.
"""

from __future__ import annotations

import copy
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (requirements-dev.txt)")

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
# the oldest Kubernetes the package knows that is still common, and the newest it knows
VERSIONS = ("1.29", kubernetes_validate.latest_version())
STREAM = "/_stcore/stream"
HEALTH = "/_stcore/health"


@pytest.fixture
def offline(monkeypatch):
    """No network while this test runs: any connection or name lookup fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network use while validating: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def manifests() -> list[dict]:
    """Every object the kustomization applies, in order."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = []
    for name in kustomization["resources"]:
        objects += [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]
    return objects


def the(kind: str, name: str) -> dict:
    (found,) = [o for o in manifests() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def container(deployment: dict) -> dict:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_the_kustomization_applies_every_file():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    kinds = sorted(o["kind"] for o in manifests())
    assert kinds == sorted(["Namespace", "Deployment", "Service", "PodDisruptionBudget",
                            "Ingress", "Ingress", "Deployment", "Service", "NetworkPolicy"])


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_against_the_kubernetes_schemas(version, offline):
    for manifest in manifests():
        # strict: an unknown field (a typo such as `readinesProbe`) is an error too
        kubernetes_validate.validate(manifest, version, strict=True)


def test_the_validator_rejects_a_broken_manifest(offline):
    broken = copy.deepcopy(the("Deployment", "tinygpt"))
    broken["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)
    typo = copy.deepcopy(the("Deployment", "tinygpt"))
    container(typo)["readinesProbe"] = container(typo).pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, VERSIONS[-1], strict=True)


def test_the_app_runs_several_replicas_with_health_checks():
    app = the("Deployment", "tinygpt")
    assert app["spec"]["replicas"] >= 2
    pod = app["spec"]["template"]
    assert selects(app["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    main = container(app)
    (port,) = main["ports"]
    assert port["containerPort"] == 8501  # the Dockerfile's Streamlit port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = main[probe]["httpGet"]
        assert check["path"] == HEALTH and check["port"] in (port["name"], 8501)
    assert main["resources"]["limits"]["memory"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_service_and_ingresses_reach_the_app():
    app, service = the("Deployment", "tinygpt"), the("Service", "tinygpt")
    assert selects(service["spec"]["selector"], app["spec"]["template"]["metadata"]["labels"])
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == container(app)["ports"][0]["name"]
    paths = {}
    for ingress in (o for o in manifests() if o["kind"] == "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                assert backend["name"] == "tinygpt" and backend["port"]["name"] == port["name"]
                paths[path["path"]] = ingress
    assert set(paths) == {"/", STREAM}


def test_the_ingress_keeps_each_browser_on_its_pod_and_the_stream_open():
    ingresses = [o for o in manifests() if o["kind"] == "Ingress"]
    cookies = set()
    for ingress in ingresses:
        notes = ingress["metadata"]["annotations"]
        assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
        assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
        # one cookie for the page and its stream: same name, path "/"
        assert notes["nginx.ingress.kubernetes.io/session-cookie-path"] == "/"
        cookies.add(notes["nginx.ingress.kubernetes.io/session-cookie-name"])
    assert len(cookies) == 1
    (stream,) = [i for i in ingresses
                 if i["spec"]["rules"][0]["http"]["paths"][0]["path"] == STREAM]
    notes = stream["metadata"]["annotations"]
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        assert int(notes[f"nginx.ingress.kubernetes.io/{timeout}"]) >= 3600
    text = (K8S / "ingress.yaml").read_text()
    assert "Streamlit session lives in the one process" in text  # the reason, for the operator


def test_the_app_uses_the_redis_service_as_its_class_store():
    env = {e["name"]: e.get("value") for e in container(the("Deployment", "tinygpt"))["env"]}
    url = urlsplit(env["TINYGPT_CLASS_STORE"])
    assert url.scheme == "redis"
    redis_service, redis_app = the("Service", url.hostname), the("Deployment", url.hostname)
    assert url.port == redis_service["spec"]["ports"][0]["port"] == 6379
    pod_labels = redis_app["spec"]["template"]["metadata"]["labels"]
    assert selects(redis_service["spec"]["selector"], pod_labels)
    args = container(redis_app)["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"  # never drop half a class

    from tinygpt_hosting.classroom.stores import open_class_store

    store = open_class_store(env["TINYGPT_CLASS_STORE"])  # the app's own parser accepts it
    assert type(store).__name__ == "RedisClassStore"


def test_only_the_app_may_reach_redis():
    policy = the("NetworkPolicy", "tinygpt-redis")["spec"]
    redis_labels = the("Deployment", "tinygpt-redis")["spec"]["template"]["metadata"]["labels"]
    app_labels = the("Deployment", "tinygpt")["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["podSelector"]["matchLabels"], redis_labels)
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert selects(source["podSelector"]["matchLabels"], app_labels)
    assert not selects(source["podSelector"]["matchLabels"], redis_labels)
