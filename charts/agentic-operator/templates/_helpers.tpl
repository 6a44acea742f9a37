{{/*
Chart name, overridable with nameOverride.
*/}}
{{- define "agentic-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object name: the release name, plus the chart name when the release name
does not already contain it. Object names stay within 63 characters.
*/}}
{{- define "agentic-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "agentic-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "agentic-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: agentic-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels that select the operator pods; immutable once installed.
*/}}
{{- define "agentic-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentic-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "agentic-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentic-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image: a tag (default: appVersion) or a digest.
*/}}
{{- define "agentic-operator.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if hasPrefix "sha256:" $tag }}
{{- printf "%s@%s" .Values.image.repository $tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
Rules on namespaced resources: what the controllers read, write and report, and nothing
more. A ClusterRole when every namespace is watched, a Role in each watched namespace
otherwise. tests/tests/chart.rs compares them with the documented list.
*/}}
{{- define "agentic-operator.namespacedRules" -}}
# Read the API's objects.
- apiGroups: ["konveyor.io"]
  resources: ["agents", "agentworkflows", "gateways", "skillcards", "skillcollections"]
  verbs: ["get", "list", "watch"]
# Own the SkillCards a SkillCollection generates: create and update them, delete the ones
# it no longer lists (only cards whose controller owner is that collection).
- apiGroups: ["konveyor.io"]
  resources: ["skillcards"]
  verbs: ["create", "delete", "patch"]
# Runs too, and deletes finished runs once their time to live has passed; creates the
# run of each workflow stage, and sets spec.cancel on it when its workflow run is cancelled.
- apiGroups: ["konveyor.io"]
  resources: ["agentruns"]
  verbs: ["create", "delete", "get", "list", "patch", "watch"]
# Workflow runs, deleted once their time to live has passed.
- apiGroups: ["konveyor.io"]
  resources: ["agentworkflowruns"]
  verbs: ["delete", "get", "list", "watch"]
# Report status with server-side apply.
- apiGroups: ["konveyor.io"]
  resources: ["agentruns/status", "agents/status", "agentworkflowruns/status", "agentworkflows/status", "gateways/status", "skillcards/status", "skillcollections/status"]
  verbs: ["get", "patch"]
# Read pull secrets and gateway credentials; apply each run's ACP key Secret, and delete
# the ones of runs that no longer exist (the orphan sweep), as well as the token Secrets
# Konveyor's Hub creates for runs that no longer exist.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create", "delete", "get", "list", "patch", "watch"]
# Apply inline-skill ConfigMaps; the sweep deletes the per-run ones earlier versions made for
# runs that are gone.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create", "delete", "get", "list", "patch", "watch"]
# Give a pod-backend sandbox the Service ACP clients reach it through; the sweep deletes
# those of runs that are gone.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["create", "delete", "get", "list"]
# Run sandboxes as Pods (pod backend) and follow the pods of Sandboxes; delete the
# sandbox of a run that was cancelled or ran past a deadline, or that no longer exists;
# write a changed Gateway Secret's version on the pods whose credential proxy mounts it.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["create", "delete", "get", "list", "patch", "watch"]
# Run sandboxes as agent-sandbox Sandboxes (and delete them, as for pods).
- apiGroups: ["agents.x-k8s.io"]
  resources: ["sandboxes"]
  verbs: ["create", "delete", "get", "list", "patch", "watch"]
# Record Events on the objects it reconciles.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# Read the namespace's trust policies and write their blast radius.
- apiGroups: ["trust.agentic-operator.io"]
  resources: ["skilltrustpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["trust.agentic-operator.io"]
  resources: ["skilltrustpolicies/status"]
  verbs: ["get", "patch"]
{{- end }}

{{/*
The cluster's trust policies apply to every watched namespace, so they are read cluster-wide
whatever namespaces are watched; so are the nodes, which skill prefetch pulls images onto. Their status is written only by an operator watching every
namespace; the permission is the same either way.
*/}}
{{- define "agentic-operator.clusterPolicyRules" -}}
# The nodes, for skill prefetch (`--skill-prefetch`): which ones runs can land on.
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["trust.agentic-operator.io"]
  resources: ["clusterskilltrustpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["trust.agentic-operator.io"]
  resources: ["clusterskilltrustpolicies/status"]
  verbs: ["get", "patch"]
{{- end }}

{{/*
The one cluster-scoped read: whether the Sandbox CRD exists (`--sandbox-backend auto`).
*/}}
{{- define "agentic-operator.crdCheckRule" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["sandboxes.agents.x-k8s.io"]
  verbs: ["get"]
{{- end }}

{{/*
crds.enabled and crds.keep, "true" or "": true when unset, as after `helm upgrade
--reuse-values` from a chart that had no `crds` values.
*/}}
{{- define "agentic-operator.crdsEnabled" -}}
{{- $crds := default (dict) .Values.crds }}
{{- if or (not (hasKey $crds "enabled")) $crds.enabled }}true{{ end }}
{{- end }}
{{- define "agentic-operator.crdsKept" -}}
{{- $crds := default (dict) .Values.crds }}
{{- if or (not (hasKey $crds "keep")) $crds.keep }}true{{ end }}
{{- end }}

{{/*
With metrics.secure: authenticate the bearer token of a /metrics request and check that its
user may get /metrics.
*/}}
{{- define "agentic-operator.metricsReviewRules" -}}
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}

{{/*
The leader-election Lease: one per release, so two releases in a namespace never share it.
*/}}
{{/*
Whether the replicas hold Leases: a leader's, or a Lease per shard and member slot.
*/}}
{{- define "agentic-operator.leases" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.shards) 1) }}true{{ end }}
{{- end }}

{{/*
`--shard-watch=server` when the shards are the API server's hash ranges; empty otherwise
(`client`, the default, or a single shard).
*/}}
{{- define "agentic-operator.shardWatchArg" -}}
{{- if and (gt (int .Values.shards) 1) (eq .Values.shardWatch "server") }}--shard-watch=server{{ end }}
{{- end }}

{{/*
The Leases the operator may write, as a YAML flow list: the leader's, and with shards the
`<lease>-shard-<i>` and `<lease>-member-<i>` of each shard.
*/}}
{{- define "agentic-operator.leaseNames" -}}
{{- $lease := include "agentic-operator.leaseName" . }}
{{- $names := list $lease }}
{{- if gt (int .Values.shards) 1 }}
{{- range $i := until (int .Values.shards) }}
{{- $names = append $names (printf "%s-shard-%d" $lease $i) }}
{{- $names = append $names (printf "%s-member-%d" $lease $i) }}
{{- end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{- define "agentic-operator.leaseName" -}}
{{- default (printf "%s-leader" (include "agentic-operator.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}
