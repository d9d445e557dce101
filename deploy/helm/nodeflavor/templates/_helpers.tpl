{{/*
Names and labels shared by every template.
*/}}

{{- define "nodeflavor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: <release>, or <release>-<chart> when they differ. */}}
{{- define "nodeflavor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodeflavor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nodeflavor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodeflavor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nodeflavor.labels" -}}
helm.sh/chart: {{ include "nodeflavor.chart" . }}
{{ include "nodeflavor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nodeflavor
{{- end }}

{{- define "nodeflavor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodeflavor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nodeflavor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Service and object names, also passed to the process as flags so the two never disagree. */}}
{{- define "nodeflavor.webhookServiceName" -}}
{{- printf "%s-webhook" (include "nodeflavor.fullname" .) }}
{{- end }}

{{- define "nodeflavor.issuerServiceName" -}}
{{- printf "%s-issuer" (include "nodeflavor.fullname" .) }}
{{- end }}

{{- define "nodeflavor.metricsServiceName" -}}
{{- printf "%s-metrics" (include "nodeflavor.fullname" .) }}
{{- end }}

{{- define "nodeflavor.admissionConfigName" -}}
{{- default (include "nodeflavor.fullname" .) .Values.admission.configName }}
{{- end }}

{{- define "nodeflavor.webhookTlsSecret" -}}
{{- default (printf "%s-webhook-tls" (include "nodeflavor.fullname" .)) .Values.tls.webhookSecretName }}
{{- end }}

{{- define "nodeflavor.issuerTlsSecret" -}}
{{- default (printf "%s-issuer-tls" (include "nodeflavor.fullname" .)) .Values.tls.issuerSecretName }}
{{- end }}

{{- define "nodeflavor.issuerCaConfigMap" -}}
{{- printf "%s-issuer-ca" (include "nodeflavor.fullname" .) }}
{{- end }}

{{- define "nodeflavor.hmacKeySecret" -}}
{{- default (printf "%s-hmac-keys" (include "nodeflavor.fullname" .)) .Values.hmacKeys.secretName }}
{{- end }}

{{- define "nodeflavor.leaderElectionId" -}}
{{- printf "%s-controller" (include "nodeflavor.fullname" .) }}
{{- end }}

{{/* True (non-empty) when a webhook is in the request path: admission on and mode webhook or both. */}}
{{- define "nodeflavor.webhookEnabled" -}}
{{- if and .Values.admission.enabled (has .Values.admission.mode (list "webhook" "both")) }}true{{ end }}
{{- end }}

{{- define "nodeflavor.policyEnabled" -}}
{{- if and .Values.admission.enabled (has .Values.admission.mode (list "policy" "both")) }}true{{ end }}
{{- end }}

{{/* The Service DNS names a serving certificate must cover. */}}
{{- define "nodeflavor.serviceDnsNames" -}}
- {{ .service }}
- {{ .service }}.{{ .namespace }}
- {{ .service }}.{{ .namespace }}.svc
- {{ .service }}.{{ .namespace }}.svc.cluster.local
{{- end }}
