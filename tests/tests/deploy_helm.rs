//! The Helm chart (deploy/helm/spear) with the real tools operators and
//! their CI run: helm v4 lints and renders it for every example values
//! file, every rendered object is validated against the Kubernetes schemas
//! (kubernetes-validate, strict), and checkov scans the manifests with no
//! failed check the chart does not explain. Wrong values get one sentence.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/spear")
}

fn cache(path: &str) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let tool = PathBuf::from(home).join(".cache/spear").join(path);
    assert!(
        tool.exists(),
        "{} is missing; run scripts/setup.sh",
        tool.display()
    );
    tool
}

fn helm(args: &[&str]) -> Output {
    Command::new(cache("tools/helm/helm"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    files
}

/// `helm template` of the chart with `values`, in namespace spear.
fn render(values: &Path) -> String {
    let chart = chart().display().to_string();
    let values = values.display().to_string();
    let out = helm(&["template", "spear", &chart, "-n", "spear", "-f", &values]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_example_lints_renders_and_validates_against_the_kubernetes_schemas() {
    let chart = chart().display().to_string();
    let work = tempfile::tempdir().unwrap();
    let mut kinds = Vec::new();
    for example in examples() {
        let values = example.display().to_string();
        let lint = helm(&["lint", &chart, "-f", &values, "--strict"]);
        assert!(lint.status.success(), "{values}: {}", text(&lint));
        let rendered = render(&example);
        let file = work.path().join(example.file_name().unwrap());
        std::fs::write(&file, &rendered).unwrap();
        let out = Command::new(cache("venv-deploy/bin/kubernetes-validate"))
            .arg("--strict")
            .arg(&file)
            .output()
            .unwrap();
        let report = text(&out);
        assert!(out.status.success(), "{values}: {report}");
        // Each object either passed, or is a Prometheus Operator or
        // cert-manager resource (a CRD, for which no schema ships with
        // Kubernetes).
        let objects = rendered.matches("\nkind: ").count();
        let passed = report.matches(" passed for resource ").count();
        let crds = report.matches("monitoring.coreos.com/v1").count()
            + report.matches("cert-manager.io/v1").count();
        assert_eq!(passed + crds, objects, "{values}: {report}");
        for line in rendered.lines() {
            if let Some(kind) = line.strip_prefix("kind: ") {
                kinds.push(kind.to_string());
            }
        }
    }
    for kind in [
        "StatefulSet",
        "Deployment",
        "DaemonSet",
        "Service",
        "ConfigMap",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PodMonitor",
        "Certificate",
        "Issuer",
        "Secret",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no example renders a {kind}"
        );
    }
}

#[test]
fn the_security_scan_finds_nothing_the_chart_does_not_explain() {
    // Not a dot-directory: checkov skips those.
    let work = tempfile::Builder::new()
        .prefix("checkov-")
        .tempdir()
        .unwrap();
    for example in examples() {
        let dir = work.path().join(example.file_stem().unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rendered.yaml"), render(&example)).unwrap();
    }
    let out = Command::new(cache("venv-deploy/bin/checkov"))
        .args([
            "--framework",
            "kubernetes",
            "--compact",
            "--quiet",
            "--skip-download",
        ])
        .arg("-d")
        .arg(work.path())
        .env("BC_SKIP_MAPPING", "TRUE")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(report.contains("Passed checks: "), "{}", text(&out));
    assert!(report.contains("Failed checks: 0,"), "{report}");
    // Every skipped check is one the chart explains where it skips it.
    let helpers = std::fs::read_to_string(chart().join("templates/_helpers.tpl")).unwrap();
    for skip in ["CKV_K8S_11", "CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_35"] {
        let at = helpers.find(&format!("{skip}=")).unwrap();
        let before = &helpers[..at];
        assert!(
            before
                .trim_end()
                .lines()
                .rev()
                .nth(1)
                .is_some_and(|l| l.trim_start().starts_with('#')),
            "{skip} is skipped without a comment saying why"
        );
    }
}

#[test]
fn workloads_are_hardened_and_probed() {
    let rendered = render(&chart().join("examples/etcd-ha.yaml"));
    for hardened in [
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        "runAsNonRoot: true",
        "drop: [\"ALL\"]",
        "automountServiceAccountToken: false",
    ] {
        // Both workloads: SMS and the spearlet.
        assert!(rendered.matches(hardened).count() >= 2, "{hardened}");
    }
    for probe in ["path: /readyz", "path: /livez"] {
        assert!(rendered.matches(probe).count() >= 2, "{probe}");
    }
    // TLS: SMS from its Secret, nodes from cert-manager's csi-driver, the
    // pod's name as node id (its certificate names it).
    assert!(rendered.contains("secretName: spear-sms-tls"));
    assert!(rendered.contains("spiffe://spear.example.com/node/${POD_NAME}"));
    assert!(rendered.contains("fieldPath: metadata.name"));
    assert!(rendered.contains("image: ghcr.io/spear-project/spear@sha256:"));
    assert!(!rendered.contains("--insecure"));
    // The embedded store: a StatefulSet.
    let embedded = render(&chart().join("examples/embedded.yaml"));
    assert!(embedded.contains("kind: StatefulSet"));
    assert!(embedded.contains("checksum/config: "));
}

/// The (base64) value of `key` in the rendered Secret `name`.
fn secret_value(rendered: &str, name: &str, key: &str) -> Option<String> {
    let field = format!("{key}: ");
    rendered
        .lines()
        .skip_while(|l| !l.contains(&format!("name: {name}")))
        .find_map(|l| l.trim().strip_prefix(field.as_str()).map(str::to_string))
}

/// What a flagless `helm install` runs: TLS from the chart's own CA
/// (cert-manager), SMS's certificate naming its SPIFFE identity, a random
/// admin token, HTTPS probes, and no `--insecure`. Plaintext takes two
/// values, and says what it costs.
#[test]
fn the_defaults_are_tls_and_a_token_and_plaintext_must_be_acknowledged() {
    let chart_dir = chart().display().to_string();
    let out = helm(&["template", "spear", &chart_dir]);
    assert!(out.status.success(), "{}", text(&out));
    let rendered = String::from_utf8(out.stdout).unwrap();
    assert!(!rendered.contains("--insecure"), "{rendered}");
    for expected in [
        "--tls-ca=/etc/spear/tls/ca.crt",
        "--tls-ca=/etc/spearlet/tls/ca.crt",
        "--admin-token-file=/etc/spear/admin/token",
        "secretName: spear-admin-token",
        "--oauth-key-file=/etc/spear/oauth/oauth.key",
        "secretName: spear-oauth-key",
        "secretName: spear-sms-tls",
        "- spiffe://spear.local/sms",
        "selfSigned: {}",
        "isCA: true",
        "csi.cert-manager.io/issuer-name: spear-ca",
        "scheme: HTTPS",
        "fieldPath: metadata.name",
    ] {
        assert!(
            rendered.contains(expected),
            "{expected} not in:\n{rendered}"
        );
    }
    // The token is random, and not the same twice.
    let token = |r: &str| secret_value(r, "spear-admin-token", "token");
    let again = String::from_utf8(helm(&["template", "spear", &chart_dir]).stdout).unwrap();
    assert!(token(&rendered).is_some_and(|t| t.len() >= 64));
    assert_ne!(token(&rendered), token(&again));
    // So is the sealing key: 32 bytes, base64 in the Secret's base64.
    let key = |r: &str| secret_value(r, "spear-oauth-key", "oauth.key");
    assert_eq!(key(&rendered).map(|k| k.len()), Some(60), "{rendered}");
    assert_ne!(key(&rendered), key(&again));

    let out = helm(&[
        "template",
        "spear",
        &chart_dir,
        "--set",
        "tls.enabled=false",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("would run SMS and the nodes in plaintext")
            && text(&out).contains("tls.acknowledgeInsecure=true"),
        "{}",
        text(&out)
    );
    let out = helm(&[
        "template",
        "spear",
        &chart_dir,
        "--set",
        "tls.enabled=false",
        "--set",
        "tls.acknowledgeInsecure=true",
    ]);
    // A DaemonSet cannot give each plaintext node a token of its own, and
    // one token shared by every node is what the chart no longer does.
    assert!(!out.status.success());
    assert!(
        text(&out).contains("each node needs a token of its own")
            && text(&out).contains("spearlet.enabled=false"),
        "{}",
        text(&out)
    );
    let out = helm(&[
        "template",
        "spear",
        &chart_dir,
        "--set",
        "tls.enabled=false",
        "--set",
        "tls.acknowledgeInsecure=true",
        "--set",
        "spearlet.enabled=false",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let plaintext = String::from_utf8(out.stdout).unwrap();
    assert!(plaintext.contains("- --insecure"));
    // Plaintext is never anonymous: SMS holds the secret node tokens
    // derive from, and no node is given it.
    assert!(plaintext.contains("name: spear-join-token"), "{plaintext}");
    assert_eq!(
        plaintext.matches("secretName: spear-join-token").count(),
        1,
        "{plaintext}"
    );
    assert!(plaintext.contains("--join-token-file=/etc/spear/join/token"));
    assert!(!plaintext.contains("kind: DaemonSet"));
    assert!(!rendered.contains("join-token"), "TLS needs no join token");
    assert!(!plaintext.contains("kind: Certificate"));

    // The operator's own issuer must be named.
    let out = helm(&[
        "template",
        "spear",
        &chart_dir,
        "--set",
        "tls.issuer.create=false",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("tls.issuer.create=false needs tls.issuer.name"),
        "{}",
        text(&out)
    );
}

/// The console is on by default, behind the SMS Service's `console`
/// port, HTTPS under TLS; `sms.console.enabled=false` turns it off.
#[test]
fn the_console_is_served_behind_the_sms_service() {
    let chart_dir = chart().display().to_string();
    let out = helm(&["template", "spear", &chart_dir]);
    assert!(out.status.success(), "{}", text(&out));
    let rendered = String::from_utf8(out.stdout).unwrap();
    for expected in [
        "--console-listen=0.0.0.0:7380",
        "containerPort: 7380",
        "targetPort: console",
        "appProtocol: https",
        "{port: console, protocol: TCP}",
    ] {
        assert!(
            rendered.contains(expected),
            "{expected} not in:\n{rendered}"
        );
    }
    let out = helm(&[
        "template",
        "spear",
        &chart_dir,
        "--set",
        "sms.console.enabled=false",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let off = String::from_utf8(out.stdout).unwrap();
    assert!(off.contains("--console-listen=off"), "{off}");
    assert!(!off.contains("targetPort: console"), "{off}");
}

#[test]
fn wrong_values_are_refused_with_a_sentence() {
    let chart = chart().display().to_string();
    let out = helm(&["template", "spear", &chart, "--set", "sms.replicas=3"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("sms.replicas above 1 needs sms.store.kind=etcd"),
        "{}",
        text(&out)
    );
    let out = helm(&["template", "spear", &chart, "--set", "sms.store.kind=etcd"]);
    assert!(
        text(&out).contains("sms.store.kind=etcd needs sms.store.etcd.endpoints"),
        "{}",
        text(&out)
    );
    let out = helm(&["lint", &chart, "--set", "sms.store.kind=mysql"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("at '/sms/store/kind': value must be one of 'embedded', 'etcd'"),
        "{}",
        text(&out)
    );
    let out = helm(&["lint", &chart, "--set", "spearlet.unknownKey=1"]);
    assert!(
        !out.status.success(),
        "unknown keys are refused: {}",
        text(&out)
    );
}

/// The kubelet updates a mounted ConfigMap by writing a new hidden
/// directory and swapping the `..data` symlink the files point through:
/// SMS's directory watch must see that, or the chart's "a server file
/// change rolls nothing" would be false.
#[test]
fn a_configmap_update_reaches_sms_without_a_restart() {
    use spear_tests::procs::{SmsOptions, SmsProc};
    use std::os::unix::fs::symlink;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("mcp.d");
    let version = |name: &str, server: &str| {
        let at = dir.join(name);
        std::fs::create_dir_all(&at).unwrap();
        let file = format!(r#"{{"mcpServers": {{"{server}": {{"command": "echo"}}}}}}"#);
        std::fs::write(at.join("servers.json"), file).unwrap();
    };
    version("..2026_11_25_v1", "before");
    symlink("..2026_11_25_v1", dir.join("..data")).unwrap();
    symlink("..data/servers.json", dir.join("servers.json")).unwrap();
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.clone()),
        ..Default::default()
    });
    let servers = || {
        let (code, out, err) = sms.client(&["servers"]);
        assert_eq!(code, 0, "{err}");
        out
    };
    spear_tests::wait::eventually(
        "the first version",
        std::time::Duration::from_secs(20),
        || {
            let out = servers();
            out.contains("before").then_some(()).ok_or(out)
        },
    );
    // The kubelet's update: a new directory, an atomic symlink swap, the
    // old directory removed.
    version("..2026_11_25_v2", "after");
    symlink("..2026_11_25_v2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join("..2026_11_25_v1")).unwrap();
    spear_tests::wait::eventually(
        "the second version",
        std::time::Duration::from_secs(20),
        || {
            let out = servers();
            (out.contains("after") && !out.contains("before"))
                .then_some(())
                .ok_or(out)
        },
    );
}
