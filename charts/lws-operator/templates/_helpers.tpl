{{/* Chart name, overridable. */}}
{{- define "lws-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of the release's objects: the release name if it already names the chart. */}}
{{- define "lws-operator.fullname" -}}
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

{{- define "lws-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lws-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lws-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lws-operator.labels" -}}
helm.sh/chart: {{ include "lws-operator.chart" . }}
{{ include "lws-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "lws-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lws-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lws-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The cert-manager Certificate that serves the webhooks (mode cert-manager). */}}
{{- define "lws-operator.certificateName" -}}
{{- printf "%s-serving-cert" (include "lws-operator.fullname" .) }}
{{- end }}

{{- define "lws-operator.certManager" -}}
{{- if eq .Values.webhook.certificates "cert-manager" }}true{{ else if eq .Values.webhook.certificates "self" }}{{ else }}{{ fail "webhook.certificates must be self or cert-manager" }}{{ end }}
{{- end }}

{{/* The metrics Service's port name (the ServiceMonitor scrapes it by name). */}}
{{- define "lws-operator.metricsPortName" -}}
{{- if .Values.metrics.secure }}https{{ else }}http{{ end }}
{{- end }}
