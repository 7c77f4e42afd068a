{{/* The application's name, overridable: `lws`, as in the upstream chart, so that the same release
name gives the same object names and the same selector labels (`app.kubernetes.io/name: lws`). */}}
{{- define "lws-operator.name" -}}
{{- default "lws" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of the release's objects: the release name if it already contains the name (`lws`,
`lws-operator`), `<release>-lws` otherwise; upstream's rule, so `helm install lws` gives
`lws-controller-manager`. */}}
{{- define "lws-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "lws-operator.name" . }}
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

{{/* The operator's Deployment, ServiceAccount and metrics Service: upstream's names. */}}
{{- define "lws-operator.managerName" -}}
{{- printf "%s-controller-manager" (include "lws-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lws-operator.metricsServiceName" -}}
{{- printf "%s-controller-manager-metrics-service" (include "lws-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lws-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lws-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's pods (the Deployment's selector and the Services'): upstream's labels,
`control-plane: controller-manager` included, for runbooks and selectors written against them. */}}
{{- define "lws-operator.podSelector" -}}
control-plane: controller-manager
{{ include "lws-operator.selectorLabels" . }}
{{- end }}

{{- define "lws-operator.labels" -}}
helm.sh/chart: {{ include "lws-operator.chart" . }}
{{ include "lws-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "lws-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lws-operator.managerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Upstream's `image.manager.*` (set) wins over `image.*`. */}}
{{- define "lws-operator.image" -}}
{{- $manager := .Values.image.manager | default (dict) }}
{{- $repository := default .Values.image.repository $manager.repository }}
{{- if has (trimSuffix "/" $repository) (list "registry.k8s.io/lws/lws" "us-central1-docker.pkg.dev/k8s-staging-images/lws" "us-central1-docker.pkg.dev/k8s-staging-images/lws/lws") }}
{{- fail (printf "image.manager.repository (or image.repository) is %s, upstream's Go controller, which cannot run this chart's arguments: set it to the lws-operator image" $repository) }}
{{- end }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion (default .Values.image.tag $manager.tag)) }}
{{- end }}

{{- define "lws-operator.pullPolicy" -}}
{{- $manager := .Values.image.manager | default (dict) }}
{{- default .Values.image.pullPolicy $manager.pullPolicy }}
{{- end }}

{{/* The webhook server's container port: upstream's `service.port` if set, else `webhook.port`. */}}
{{- define "lws-operator.webhookPort" -}}
{{- $service := .Values.service | default (dict) }}
{{- default .Values.webhook.port $service.port }}
{{- end }}

{{/* The cert-manager Certificate that serves the webhooks (mode cert-manager). */}}
{{- define "lws-operator.certificateName" -}}
{{- printf "%s-serving-cert" (include "lws-operator.fullname" .) }}
{{- end }}

{{/* Webhook certificates from cert-manager: `webhook.certificates: cert-manager` or upstream's
`enableCertManager: true`. */}}
{{- define "lws-operator.certManager" -}}
{{- if .Values.enableCertManager }}true{{ else if eq .Values.webhook.certificates "cert-manager" }}true{{ else if eq .Values.webhook.certificates "self" }}{{ else }}{{ fail "webhook.certificates must be self or cert-manager" }}{{ end }}
{{- end }}

{{/* /metrics served: `metrics.enabled`, or upstream's `enablePrometheus: true`. */}}
{{- define "lws-operator.metricsEnabled" -}}
{{- if or .Values.metrics.enabled .Values.enablePrometheus }}true{{ end }}
{{- end }}

{{/* A ServiceMonitor: `metrics.serviceMonitor.enabled`, or upstream's `enablePrometheus: true`. */}}
{{- define "lws-operator.serviceMonitor" -}}
{{- if or .Values.metrics.serviceMonitor.enabled .Values.enablePrometheus }}true{{ end }}
{{- end }}

{{/* Upstream's `enableCertManager: true` also has cert-manager issue the metrics serving
certificate (Certificate `lws-metrics-cert`, Secret `lws-metrics-server-cert`), unless
`metrics.certSecretName` names one already. */}}
{{- define "lws-operator.metricsCertificate" -}}
{{- if and .Values.enableCertManager (include "lws-operator.metricsEnabled" .) .Values.metrics.secure (not .Values.metrics.certSecretName) }}true{{ end }}
{{- end }}

{{/* The Secret /metrics serves its certificate from; empty: a self-signed one per start. */}}
{{- define "lws-operator.metricsCertSecret" -}}
{{- if include "lws-operator.metricsCertificate" . }}lws-metrics-server-cert{{ else if and (include "lws-operator.metricsEnabled" .) .Values.metrics.secure }}{{ .Values.metrics.certSecretName }}{{ end }}
{{- end }}

{{/* The metrics Service's port name (the ServiceMonitor scrapes it by name). */}}
{{- define "lws-operator.metricsPortName" -}}
{{- if .Values.metrics.secure }}https{{ else }}http{{ end }}
{{- end }}
