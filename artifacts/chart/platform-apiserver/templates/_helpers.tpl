{{- define "platform-apiserver.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "platform-apiserver.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "platform-apiserver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "platform-apiserver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "platform-apiserver.labels" -}}
{{ include "platform-apiserver.selectorLabels" . }}
app.kubernetes.io/part-of: platform-apiserver
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "platform-apiserver.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "platform-apiserver.replicas" -}}
{{- if .Values.ha.enabled -}}
{{ max .Values.replicas .Values.ha.replicas }}
{{- else -}}
{{ .Values.replicas }}
{{- end -}}
{{- end -}}

{{- define "platform-apiserver.tlsSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{ include "platform-apiserver.fullname" . }}-tls
{{- else -}}
{{ required "tls.existingSecret (or tls.certManager.enabled=true) is required" .Values.tls.existingSecret }}
{{- end -}}
{{- end -}}

{{- define "platform-apiserver.serviceHost" -}}
{{ include "platform-apiserver.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end -}}
