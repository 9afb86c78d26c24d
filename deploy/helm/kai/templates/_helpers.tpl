{{/* Base name of the namespaced objects. */}}
{{- define "kai.fullname" -}}
{{- .Values.fullnameOverride | default "kai-scheduler" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the ClusterRole and ClusterRoleBinding; KAI Scheduler's chart owns "kai-scheduler". */}}
{{- define "kai.clusterRoleName" -}}
{{- printf "%s-run" (include "kai.fullname" .) -}}
{{- end -}}

{{- define "kai.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "kai.fullname" .) -}}
{{- end -}}

{{- define "kai.leaderElectionNamespace" -}}
{{- .Values.leaderElection.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "kai.selectorLabels" -}}
app.kubernetes.io/name: kai
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kai.labels" -}}
{{ include "kai.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kai
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
