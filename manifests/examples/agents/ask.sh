#!/usr/bin/env bash
# Ask a person before doing something, from any shell script: with `pizzabot ask` and with
# plain curl. PIZZABOT_URL says where the server is; PIZZABOT_AGENT_TOKEN is this script's own
# token of scope ask, which files requests and can decide nothing:
#   export PIZZABOT_AGENT_TOKEN=$(pizzabot tokens create my-script --scope ask)
# PIZZABOT_SKILL names the inbox-only skill (default approvals, which `make serve` loads).
set -uo pipefail
: "${PIZZABOT_URL:=http://127.0.0.1:8787}"
skill=${PIZZABOT_SKILL:-approvals}
token=${PIZZABOT_AGENT_TOKEN:-}
if [ -z "$token" ]; then
  echo "not sent: no token; make this script one that can only ask:" >&2
  echo "  export PIZZABOT_AGENT_TOKEN=\$(pizzabot tokens create my-script --scope ask)" >&2
  exit 2
fi

# 1. pizzabot ask: exit 0 approved or edited, 1 rejected or expired, 3 still pending,
#    2 the request could not be made (then nothing was decided: do not go ahead either).
decision=$(PIZZABOT_API_TOKEN=$token pizzabot ask "$skill" --tool send_email --title "Mail Ann the quote" \
  --args '{"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}' \
  --wait --timeout 3600)
case $? in
  0) echo "go ahead with: $(jq -c .args <<<"$decision")" ;;
  2) echo "not sent: Pizza Bot could not be asked (the error is above)" >&2; exit 2 ;;
  *) echo "not sent: $(jq -r '.reason // .status' <<<"$decision")" ;;
esac

# 2. The same with curl: create the request (the key makes a retry safe), then long-poll.
auth=(-H "Authorization: Bearer $token")
id=$(curl -sf "${auth[@]}" -H "Idempotency-Key: quote-ann-$(date +%Y%m%d)" \
  -H "Content-Type: application/json" "$PIZZABOT_URL/api/requests" \
  -d '{"skill": "'"$skill"'", "title": "Mail Ann the quote", "tool": "send_email",
       "args": {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}}' |
  jq -r .id) || { echo "not sent: Pizza Bot could not be asked" >&2; exit 2; }
while :; do
  state=$(curl -sf "${auth[@]}" "$PIZZABOT_URL/api/requests/$id?wait=60") ||
    { echo "not sent: Pizza Bot stopped answering" >&2; exit 2; }
  [ "$(jq -r .status <<<"$state")" != pending ] && break
done
jq . <<<"$state"
