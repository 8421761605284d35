{{/* Names and labels shared by every object. */}}
{{- define "spear.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "spear.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "spear.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "spear.image" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Security-scan findings the chart departs from on purpose, each with
why, as checkov reads them (one annotation per check). */}}
{{- define "spear.scanExceptions" -}}
# No CPU limit: a limit throttles a burst of guest runs or a registry
# snapshot for no gain; requests reserve what is needed.
checkov.io/skip1: CKV_K8S_11=CPU limits throttle bursts; requests are set
# Tags by default so the chart works out of the box; set image.digest to
# pin by digest.
checkov.io/skip2: CKV_K8S_43=image.digest pins by digest when set
# IfNotPresent with immutable release tags or digests; Always would make
# every node restart depend on the registry being reachable.
checkov.io/skip3: CKV_K8S_15=release tags and digests are immutable
# Server files and the node TOML name their secrets as environment
# variables (${NAME}, api_key_env); the values come from Secrets through
# secretKeyRef and are never logged. Files (admin token, OAuth key, etcd
# password, TLS keys) are mounted as files.
checkov.io/skip4: CKV_K8S_35=secrets named by server files are environment variables by design
{{- end -}}

{{/* The spearlet's own exceptions, on top of the chart's. */}}
{{- define "spear.nodeScanExceptions" -}}
{{ include "spear.scanExceptions" . }}
# The node confines every MCP server it starts in namespaces of its own,
# with a seccomp filter and Landlock per server (docs/security.md, "The
# sandbox"); the runtime's default seccomp profile forbids making those
# namespaces, so the node container runs without one.
checkov.io/skip5: CKV_K8S_31=the node applies its own seccomp filter to each MCP server it sandboxes
{{- end -}}

{{/* The spearlet container: the hardened defaults, but no runtime seccomp
or AppArmor profile, which forbid the user namespaces and mounts the
node's per-server sandbox is made of (it applies its own filter to each
server). No capability is kept; privilege escalation stays off. */}}
{{- define "spear.nodeContainerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: Unconfined
appArmorProfile:
  type: Unconfined
{{- end -}}

{{/* Hardened defaults for every container: non-root, read-only root
filesystem, no privilege escalation, no capabilities. */}}
{{- define "spear.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "spear.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "spear.smsAddress" -}}
{{- printf "%s-sms.%s.svc:%v" (include "spear.fullname" .) .Release.Namespace .Values.sms.service.grpcPort -}}
{{- end -}}

{{/* The issuer of every certificate: the chart's CA, or the operator's. */}}
{{- define "spear.issuerName" -}}
{{- if .Values.tls.issuer.create -}}
{{- printf "%s-ca" (include "spear.fullname" .) -}}
{{- else -}}
{{- required "tls.issuer.create=false needs tls.issuer.name: the cert-manager Issuer or ClusterIssuer that signs Spear's certificates" .Values.tls.issuer.name -}}
{{- end -}}
{{- end -}}

{{- define "spear.issuerKind" -}}
{{- ternary "Issuer" .Values.tls.issuer.kind .Values.tls.issuer.create -}}
{{- end -}}

{{/* SMS's certificate Secret: the operator's, or the chart's Certificate's. */}}
{{- define "spear.smsSecret" -}}
{{- .Values.tls.smsSecret | default (printf "%s-sms-tls" (include "spear.fullname" .)) -}}
{{- end -}}

{{/* The admin token's Secret: the operator's, or the one the chart makes. */}}
{{- define "spear.oauthKeySecret" -}}
{{- .Values.sms.oauthKeySecret.name | default (printf "%s-oauth-key" (include "spear.fullname" .)) -}}
{{- end -}}

{{- define "spear.adminTokenSecret" -}}
{{- .Values.sms.adminTokenSecret.name | default (printf "%s-admin-token" (include "spear.fullname" .)) -}}
{{- end -}}

{{/* The probes' and scrapers' scheme: the metrics port is HTTPS with TLS. */}}
{{- define "spear.metricsScheme" -}}
{{- ternary "HTTPS" "HTTP" .Values.tls.enabled -}}
{{- end -}}

{{/* Plaintext only when asked for in so many words. */}}
{{- define "spear.checkTls" -}}
{{- if and (not .Values.tls.enabled) (not .Values.tls.acknowledgeInsecure) -}}
{{- fail "tls.enabled=false would run SMS and the nodes in plaintext (--insecure), where anyone who reaches the pods can read registry secrets and act as a node; keep TLS on (it needs cert-manager), or also set tls.acknowledgeInsecure=true on a network you trust" -}}
{{- end -}}
{{- if and (not .Values.tls.enabled) .Values.spearlet.enabled -}}
{{- fail "tls.enabled=false with spearlet.enabled: in plaintext each node needs a token of its own (`sms nodes join-token NODE`), and a DaemonSet cannot hand one to each pod (every pod would read every node's token); keep TLS on (each pod gets its own certificate), or set spearlet.enabled=false and run the nodes outside the chart, each with its own join token (docs/security.md)" -}}
{{- end -}}
{{- end -}}
