{{/* Name of the chart, or nameOverride. */}}
{{- define "sundial.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: <release>-sundial unless the release already says sundial. */}}
{{- define "sundial.fullname" -}}
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

{{- define "sundial.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "sundial.labels" -}}
helm.sh/chart: {{ include "sundial.chart" . }}
app.kubernetes.io/name: {{ include "sundial.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sundial
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "api"). */}}
{{- define "sundial.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sundial.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sundial.componentLabels" -}}
{{ include "sundial.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sundial.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "sundial.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sundial.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* SUNDIAL_REDIS_URL from the redis values (docs/configuration.md has the forms). */}}
{{- define "sundial.redisURL" -}}
{{- $r := .Values.redis }}
{{- if eq $r.mode "standalone" }}
{{- $s := $r.standalone }}
{{- $auth := "" }}
{{- if $r.password }}
{{- $auth = printf "%s:%s@" (urlquery $s.username | replace "+" "%20") (urlquery $r.password | replace "+" "%20") }}
{{- else if $s.username }}
{{- fail "redis.standalone.username needs redis.password" }}
{{- end }}
{{- /* urlquery writes a space as +, which a URL's user info would keep: %20 instead. */}}
{{- printf "%s://%s%s:%v/%v" (ternary "rediss" "redis" $s.tls) $auth $s.host $s.port $s.db }}
{{- else if eq $r.mode "sentinel" }}
{{- $s := $r.sentinel }}
{{- if not $s.nodes }}{{ fail "redis.sentinel.nodes: list the Sentinels as host:port" }}{{ end }}
{{- $auth := "" }}
{{- if $r.password }}{{ $auth = printf ":%s@" (urlquery $r.password | replace "+" "%20") }}{{ end }}
{{- printf "redis+sentinel://%s%s/%s/%v" $auth (join "," $s.nodes) $s.masterName $s.db }}
{{- else if eq $r.mode "cluster" }}
{{- if not $r.cluster.nodes }}{{ fail "redis.cluster.nodes: list seed nodes as host:port" }}{{ end }}
{{- if $r.password }}{{ fail "redis.password is not supported with redis.mode=cluster: SUNDIAL_REDIS_URL's cluster form has no password" }}{{ end }}
{{- join "," $r.cluster.nodes }}
{{- end }}
{{- end }}

{{/* Whether the chart generates the API key: no keys given, no Secret of them named, no open API asked for. */}}
{{- define "sundial.generatedKey" -}}
{{- if not (or .Values.apiKeys.keys .Values.apiKeys.existingSecret .Values.apiKeys.allowOpen) }}true{{ end }}
{{- end }}

{{/*
The generated API key: the one the release's Secret already holds (so an
upgrade keeps it), else a new random one. lookup finds nothing under
helm template, which renders a new key each time.
*/}}
{{- define "sundial.apiKey" -}}
{{- $old := "" }}
{{- with lookup "v1" "Secret" .Release.Namespace (include "sundial.fullname" .) }}
{{- $old = index (.data | default dict) "api-keys" | default "" }}
{{- end }}
{{- if $old }}{{ $old | b64dec }}{{ else }}{{ randAlphaNum 48 }}{{ end }}
{{- end }}

{{/* Whether the API reads SUNDIAL_API_KEYS from a Secret (else it is open). */}}
{{- define "sundial.apiKeys" -}}
{{- if or .Values.apiKeys.keys .Values.apiKeys.existingSecret (include "sundial.generatedKey" .) }}true{{ end }}
{{- end }}

{{/* Whether the chart's own Secret has anything to hold. */}}
{{- define "sundial.ownSecret" -}}
{{- if or (not .Values.redis.existingSecret) (and .Values.history.enabled (not .Values.mongodb.existingSecret)) (and .Values.apiKeys.keys (not .Values.apiKeys.existingSecret)) (include "sundial.generatedKey" .) }}true{{ end }}
{{- end }}

{{/* Shutdown timeout of a component in seconds: (dict "root" $ "component" "worker"). */}}
{{- define "sundial.shutdownSeconds" -}}
{{- $c := index .root.Values .component }}
{{- if and (hasKey $c "shutdownTimeoutSeconds") (not (kindIs "invalid" $c.shutdownTimeoutSeconds)) }}
{{- $c.shutdownTimeoutSeconds }}
{{- else }}
{{- .root.Values.shutdownTimeoutSeconds }}
{{- end }}
{{- end }}

{{/*
Environment of a Sundial container: (dict "root" $ "component" "api").
Secrets come by reference; config and the component's config are added
last, in name order.
*/}}
{{- define "sundial.env" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $c := index $v .component }}
{{- $fullname := include "sundial.fullname" $root }}
- name: SUNDIAL_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $v.redis.existingSecret | default $fullname }}
      key: {{ ternary $v.redis.existingSecretKey "redis-url" (ne $v.redis.existingSecret "") }}
- name: SUNDIAL_HISTORY
  value: {{ ternary "on" "off" $v.history.enabled | quote }}
{{- if $v.history.enabled }}
- name: SUNDIAL_MONGO_URI
  valueFrom:
    secretKeyRef:
      name: {{ $v.mongodb.existingSecret | default $fullname }}
      key: {{ ternary $v.mongodb.existingSecretKey "mongodb-uri" (ne $v.mongodb.existingSecret "") }}
- name: SUNDIAL_MONGO_DB
  value: {{ $v.mongodb.database | quote }}
{{- end }}
- name: SUNDIAL_SHUTDOWN_TIMEOUT
  value: {{ printf "%ss" (include "sundial.shutdownSeconds" .) | quote }}
{{- if eq .component "api" }}
- name: SUNDIAL_HTTP_ADDR
  value: {{ printf "0.0.0.0:%v" $c.port | quote }}
{{- if include "sundial.apiKeys" $root }}
- name: SUNDIAL_API_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ $v.apiKeys.existingSecret | default $fullname }}
      key: {{ ternary $v.apiKeys.existingSecretKey "api-keys" (ne $v.apiKeys.existingSecret "") }}
{{- end }}
{{- with $v.oidc }}
{{- if .issuer }}
{{- if not .existingSecret }}
{{- fail "oidc.issuer is set: oidc.existingSecret must name the Secret that holds the client secret and the session secret" }}
{{- end }}
{{- if not (and .clientId .redirectURL) }}
{{- fail "oidc.issuer is set: oidc.clientId and oidc.redirectURL are needed too" }}
{{- end }}
- name: SUNDIAL_OIDC_ISSUER
  value: {{ .issuer | quote }}
- name: SUNDIAL_OIDC_CLIENT_ID
  value: {{ .clientId | quote }}
- name: SUNDIAL_OIDC_REDIRECT_URL
  value: {{ .redirectURL | quote }}
- name: SUNDIAL_OIDC_ROLES_CLAIM
  value: {{ .rolesClaim | quote }}
- name: SUNDIAL_OIDC_ROLES
  value: {{ .roles | quote }}
- name: SUNDIAL_OIDC_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .clientSecretKey }}
- name: SUNDIAL_SESSION_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .sessionSecretKey }}
{{- end }}
{{- end }}
{{- else }}
- name: SUNDIAL_METRICS_ADDR
  value: {{ printf "0.0.0.0:%v" $c.metricsPort | quote }}
{{- end }}
{{- if eq .component "worker" }}
- name: SUNDIAL_WORKER_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- with $v.encryption }}
{{- if .existingSecret }}
- name: SUNDIAL_KEYRING
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .keyringKey }}
{{- if .primary }}
- name: SUNDIAL_KEYRING_PRIMARY
  value: {{ .primary | quote }}
{{- end }}
{{- else if .primary }}
{{- fail "encryption.primary is set: encryption.existingSecret must name the Secret that holds the keyring" }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $value := merge (deepCopy ($c.config | default dict)) $v.config }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Pod-level settings shared by the three Deployments: (dict "root" $ "component" "api"). */}}
{{- define "sundial.podCommon" -}}
{{- $v := .root.Values }}
{{- $c := index $v .component }}
serviceAccountName: {{ include "sundial.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end }}

{{/* Pod annotations: a checksum of the chart's Secret rolls pods when it changes. */}}
{{- define "sundial.podAnnotations" -}}
{{- $c := index .root.Values .component }}
checksum/secret: {{ include (print .root.Template.BasePath "/secret.yaml") .root | sha256sum }}
{{- with $c.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
