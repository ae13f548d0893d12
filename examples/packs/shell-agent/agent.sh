#!/bin/sh
# shell-agent: the agent contract in ~60 lines of POSIX sh + curl (docs/agent.md "Another agent").
#
# Task in:  $CORRAL_INBOX/tasks.json (a JSON array), or, when CORRAL_TASK_SOURCE=http (a warm pool
#           member started before its task), GET $CORRAL_EVENTS_URL/tasks/next (200 task, 204 ask
#           again, 404/410 nothing more); such a task carries proxy_token, the task's own token.
# Events:   POST $CORRAL_EVENTS_URL/task/<id>/event, JSON {type, ...}, through HTTPS_PROXY (curl
#           reads it, the token is its password) trusting CURL_CA_BUNDLE (the corral CA).
# A description containing "break-schema" also posts a progress_status without `percent`, which
# this pack's schema refuses; the answer's status goes into the summary.
set -eu

EVENTS="${CORRAL_EVENTS_URL:-https://corral.internal}"
OUT="${SHELL_AGENT_FILE:-shell-agent.txt}"
BODY=/tmp/shell-agent-response

# The task JSON is corral's (keys in a fixed order: id, description, ...). Values stay JSON-escaped,
# which is what the event bodies need.
field_id() { sed -n 's/^[^{]*{"id":"\([^"]*\)".*/\1/p'; }
field_description() { sed -n -E 's/^[^{]*\{"id":"[^"]*","description":"(([^"\\]|\\.)*)".*/\1/p'; }
field_token() { sed -n 's/.*"proxy_token":"\([^"]*\)".*/\1/p'; }

if [ "${CORRAL_TASK_SOURCE:-}" = http ]; then
  while :; do
    code=$(curl -sS -o "$BODY" -w '%{http_code}' "$EVENTS/tasks/next") || { sleep 1; continue; }
    case "$code" in
      200) break ;;
      204) continue ;;
      404|410) exit 0 ;;
      *) echo "shell-agent: GET /tasks/next answered $code" >&2; exit 1 ;;
    esac
  done
  TASK=$(cat "$BODY")
  token=$(printf '%s' "$TASK" | field_token)
  # From now on use the task's own token (the proxy URL's password).
  if [ -n "$token" ]; then
    HTTPS_PROXY=$(printf '%s' "$HTTPS_PROXY" | sed "s#^\(https\{0,1\}://[^:]*:\)[^@]*@#\1$token@#")
    export HTTPS_PROXY https_proxy="$HTTPS_PROXY" CORRAL_PROXY_TOKEN="$token"
  fi
else
  TASK=$(cat "$CORRAL_INBOX/tasks.json")
fi
ID=$(printf '%s' "$TASK" | field_id)
DESC=$(printf '%s' "$TASK" | field_description)
[ -n "$ID" ] || { echo "shell-agent: no task id in the task" >&2; exit 1; }

# post JSON → prints the HTTP status; a refusal is reported on stderr and does not stop the agent.
post() {
  code=$(curl -sS -o "$BODY" -w '%{http_code}' -H 'content-type: application/json' --data "$1" "$EVENTS/task/$ID/event") || code=000
  case "$code" in 2*) ;; *) echo "shell-agent: event refused ($code): $(cat "$BODY" 2>/dev/null)" >&2 ;; esac
  printf '%s' "$code"
}

post "{\"type\":\"session_start\",\"session_id\":\"shell-$CORRAL_WORKSPACE_ID\",\"provider\":\"none\",\"model\":\"none\"}" >/dev/null
post "{\"type\":\"task_start\",\"description\":\"$DESC\"}" >/dev/null
post '{"type":"progress_status","iteration":0,"percent":10}' >/dev/null

action=created
[ -e "$OUT" ] && action=modified
printf '%s\n' "$DESC" > "$OUT"
size=$(wc -c < "$OUT" | tr -d ' ')
post "{\"type\":\"file_change\",\"path\":\"$OUT\",\"action\":\"$action\",\"size\":$size}" >/dev/null

summary="wrote $OUT"
case "$DESC" in
  *break-schema*) summary="$summary; progress_status without percent answered $(post '{"type":"progress_status","iteration":0}')" ;;
esac
post '{"type":"progress_status","iteration":0,"percent":100}' >/dev/null
post "{\"type\":\"task_end\",\"status\":\"completed\",\"summary\":\"$summary\"}" >/dev/null
