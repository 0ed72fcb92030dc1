"""deploy/k8s renders (kustomize base semantics: resources + namespace + labels) into
manifests that validate against the Kubernetes API schemas in strict mode, and keep the
rules the deployment promises (secrets only in Secrets, probes on real health endpoints,
resources, PDBs, scrape annotations, RBAC for Spark executors)."""
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
K8S_VERSION = "1.30.0"


def render() -> list[dict]:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    labels = {k: v for entry in kust.get("labels", []) for k, v in entry["pairs"].items()}
    docs = []
    for res in kust["resources"]:
        for doc in yaml.safe_load_all((K8S / res).read_text()):
            if not doc:
                continue
            if doc["kind"] != "Namespace":
                doc["metadata"]["namespace"] = kust["namespace"]
            doc["metadata"].setdefault("labels", {}).update(labels)
            docs.append(doc)
    return docs


DOCS = render()


def by_kind(kind):
    return [d for d in DOCS if d["kind"] == kind]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_validates_strictly(doc):
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_validator_rejects_a_broken_manifest():
    bad = yaml.safe_load((K8S / "master.yaml").read_text().split("---")[1])
    bad["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_expected_workloads():
    kinds = {(d["kind"], d["metadata"]["name"]) for d in DOCS}
    assert {("StatefulSet", "etcd"), ("Deployment", "shardmerge-master"), ("StatefulSet", "worker"),
            ("ServiceAccount", "shardmerge-spark"), ("Role", "shardmerge-spark"),
            ("RoleBinding", "shardmerge-spark")} <= kinds
    assert next(d for d in DOCS if d["metadata"]["name"] == "etcd" and d["kind"] == "StatefulSet")["spec"]["replicas"] == 3
    assert next(d for d in by_kind("Deployment"))["spec"]["replicas"] >= 2
    assert {d["metadata"]["name"] for d in by_kind("PodDisruptionBudget")} >= {"etcd", "shardmerge-master", "shardmerge-worker"}


@pytest.mark.parametrize("name", ["shardmerge-master", "worker"])
def test_probes_resources_and_scrape_annotations(name):
    wl = next(d for d in DOCS if d["metadata"]["name"] == name and d["kind"] in ("Deployment", "StatefulSet"))
    pod = wl["spec"]["template"]
    c = pod["spec"]["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_passwords_only_in_secrets():
    for cm in by_kind("ConfigMap"):
        for key, text in cm["data"].items():
            for line in text.splitlines():
                assert not line.strip().startswith("password:"), f"ConfigMap {cm['metadata']['name']}/{key} holds a password"
    worker = next(d for d in by_kind("StatefulSet") if d["metadata"]["name"] == "worker")
    env = {e["name"]: e for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SOURCE_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "shardmerge-db"
    assert env["TARGET_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "shardmerge-db"


def test_sample_configs_in_configmaps_parse():
    from coordinator.config import parse_source, parse_task
    cms = {d["metadata"]["name"]: d for d in by_kind("ConfigMap")}
    for key, text in cms["shardmerge-sources"]["data"].items():
        assert parse_source(text, key).db.password_env == "SOURCE_PASSWORD"
    for key, text in cms["shardmerge-tasks"]["data"].items():
        assert parse_task(text, key).shard_mode == "optimistic"


def test_spark_rbac_allows_executor_pods():
    role = next(d for d in by_kind("Role") if d["metadata"]["name"] == "shardmerge-spark")
    rule = next(r for r in role["rules"] if "pods" in r["resources"])
    assert {"create", "delete", "watch", "list"} <= set(rule["verbs"])
    worker = next(d for d in by_kind("StatefulSet") if d["metadata"]["name"] == "worker")
    assert worker["spec"]["template"]["spec"]["serviceAccountName"] == "shardmerge-spark"


def _master() -> dict:
    return next(d for d in DOCS if d["kind"] == "Deployment" and d["metadata"]["name"] == "shardmerge-master")


def test_the_base_master_is_tls_only_and_its_flags_parse():
    """The default deployment is the secured one (no overlay): mutual TLS, CN roles, HTTPS probes,
    every file a flag names mounted from the Secret the flag's comment names."""
    from coordinator.cli import build_parser
    dep = _master()
    c = dep["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(c["args"])          # every flag is one shardctl master knows
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path in (args.ssl_ca, args.ssl_cert, args.ssl_key):
        assert any(path.startswith(m + "/") for m in mounts), path
    assert "shardmerge-master" in args.cert_allowed_cn.split(",") and args.ssl_peer_name == "shardmerge-master"
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS" and c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert vols["tls"]["secret"]["secretName"] == "shardmerge-master-tls"


@pytest.mark.parametrize("name", ["shardmerge-master", "worker", "etcd-auth"])
def test_every_etcd_client_mounts_what_the_configmap_points_at(name):
    """etcd is reached over https with a client certificate and a password file; the files the
    ConfigMap's SHARDMERGE_ETCD_* name are mounted from the Secrets make-secrets creates."""
    cm = next(d for d in by_kind("ConfigMap") if d["metadata"]["name"] == "shardmerge")["data"]
    assert cm["SHARDMERGE_ETCD"].startswith("https://") and cm["SHARDMERGE_ETCD_USER"] == "shardmerge"
    wl = next(d for d in DOCS if d["metadata"]["name"] == name and d["kind"] in ("Deployment", "StatefulSet", "Job"))
    spec = wl["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    for key in ("SHARDMERGE_ETCD_CACERT", "SHARDMERGE_ETCD_CERT", "SHARDMERGE_ETCD_KEY", "SHARDMERGE_ETCD_PASSWORD_FILE"):
        folder = cm[key].rsplit("/", 1)[0]
        assert folder in mounts, (name, key)
        assert secrets[mounts[folder]] in ("shardmerge-etcd-client", "shardmerge-etcd-auth"), (name, key)
    make = (K8S / "make-secrets").read_text()
    for secret in secrets.values():
        assert f"generic {secret} " in make.replace("$k ", "generic "), f"make-secrets does not create {secret}"


def test_etcd_runs_tls_only_for_clients_and_peers():
    sts = next(d for d in by_kind("StatefulSet") if d["metadata"]["name"] == "etcd")
    args = [a.split("#")[0].strip() for a in sts["spec"]["template"]["spec"]["containers"][0]["args"]]
    urls = [a for a in args if "-urls=" in a and "metrics" not in a]
    assert urls and all("http://" not in a for a in urls), urls
    assert "--client-cert-auth" in args and "--peer-client-cert-auth" in args


def test_spark_is_authenticated_and_its_role_only_manages_executors():
    spark = next(d for d in by_kind("ConfigMap") if d["metadata"]["name"] == "shardmerge-spark")
    conf = dict(line.split(None, 1) for line in spark["data"]["spark-defaults.conf"].splitlines()
                if line.strip() and not line.lstrip().startswith("#"))
    assert conf["spark.authenticate"].strip() == "true"
    role = next(d for d in by_kind("Role") if d["metadata"]["name"] == "shardmerge-spark")
    verbs = {v for r in role["rules"] for v in r["verbs"]}
    resources = {x for r in role["rules"] for x in r["resources"]}
    assert not verbs & {"patch", "update", "*"} and resources <= {"pods", "services", "configmaps"}


def test_dockerfile_build_stage_has_what_the_wheel_build_reads():
    """CI does not build the image (``scripts/image-test`` does, in minutes): at least the build
    stage copies every file pyproject.toml makes the wheel build read."""
    import tomllib
    root = K8S.parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    needed = {project["readme"], *project.get("license-files", [])}
    copied: set[str] = set()
    for line in (root / "deploy" / "Dockerfile").read_text().split("FROM")[1].splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied.update(line.split()[1:-1])
    assert needed <= copied, f"the build stage misses {needed - copied}"
    packages = {p.rstrip("*") for p in tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
                ["packages"]["find"]["include"]}
    assert packages <= copied, packages - copied


def test_the_base_master_starts_secured_beyond_loopback():
    """A master beyond loopback without TLS or tokens refuses to start unless ``--insecure``: the
    base needs no such flag."""
    from coordinator.access.exposure import check
    from coordinator.access.policy import AccessPolicy
    from coordinator.cli import build_parser
    from coordinator.cli.master import _cn_list
    from coordinator.access.tls import TlsFiles
    args = build_parser().parse_args(_master()["spec"]["template"]["spec"]["containers"][0]["args"])
    assert not args.insecure and "shardmerge-master" in args.http_allowed_hosts.split(",")
    # what `shardctl master` decides from these flags (coordinator/cli/master.py)
    tls = TlsFiles(args.ssl_ca, args.ssl_cert, args.ssl_key, origin="master.yaml", peer_name=args.ssl_peer_name)
    policy = AccessPolicy.from_settings(args.ssl_ca, _cn_list(args.cert_allowed_cn), _cn_list(args.cert_read_only_cn),
                                        args.auth_token_file)
    secured = tls.enabled or not policy.open
    assert secured and not policy.open
    addrs = {"--listen": args.listen, "--metrics-addr": args.metrics_addr}
    assert check(addrs, secured, bool(args.insecure), origin="master.yaml") == ""


def test_every_component_has_a_network_policy_behind_a_default_deny():
    pols = {d["metadata"]["name"]: d for d in by_kind("NetworkPolicy")}
    deny = pols["default-deny-ingress"]
    assert deny["spec"]["podSelector"] == {} and deny["spec"]["policyTypes"] == ["Ingress"]
    assert "ingress" not in deny["spec"]
    pods = [d for d in DOCS if d["kind"] in ("Deployment", "StatefulSet")]
    for wl in pods:
        labels = wl["spec"]["template"]["metadata"]["labels"]
        covering = [p for n, p in pols.items() if n != "default-deny-ingress"
                    and p["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()]
        assert covering, f"{wl['kind']}/{wl['metadata']['name']} has no NetworkPolicy"
    # etcd, the root of trust: its client port from the masters and workers only
    client = next(r for r in pols["etcd"]["spec"]["ingress"] if {"port": 2379} in r["ports"])
    assert {tuple(s["podSelector"]["matchLabels"].values())[0] for s in client["from"]} == \
        {"shardmerge-master", "shardmerge-worker", "etcd-auth"}


def test_no_placeholder_secret_is_applied_and_pods_are_confined():
    assert not by_kind("Secret"), "a Secret with placeholder values would be applied"
    assert (K8S / "secret.example.yaml").exists()
    for wl in (d for d in DOCS if d["kind"] in ("Deployment", "StatefulSet")):
        spec = wl["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, wl["metadata"]["name"]
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, wl["metadata"]["name"]
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"], c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
