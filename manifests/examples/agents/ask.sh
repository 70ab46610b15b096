#!/usr/bin/env bash
# Ask a person before doing something, from any shell script: with `pizzabot ask` and with
# plain curl. PIZZABOT_URL and PIZZABOT_API_TOKEN say where the server is.
set -euo pipefail
: "${PIZZABOT_URL:=http://127.0.0.1:8787}"

# 1. pizzabot ask: exit 0 approved or edited, 1 rejected or expired, 3 pending, 2 errors.
if decision=$(pizzabot ask agents --tool send_email --title "Mail Ann the quote" \
    --args '{"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}' \
    --wait --timeout 3600); then
  echo "go ahead with: $(jq -c .args <<<"$decision")"
else
  echo "not sent: $(jq -r '.reason // .status' <<<"$decision")"
fi

# 2. The same with curl: create the request (the key makes a retry safe), then long-poll.
auth=(-H "Authorization: Bearer $PIZZABOT_API_TOKEN")
id=$(curl -sf "${auth[@]}" -H "Idempotency-Key: quote-ann-$(date +%Y%m%d)" \
  -H "Content-Type: application/json" "$PIZZABOT_URL/api/requests" \
  -d '{"skill": "agents", "title": "Mail Ann the quote", "tool": "send_email",
       "args": {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}}' |
  jq -r .id)
while :; do
  state=$(curl -sf "${auth[@]}" "$PIZZABOT_URL/api/requests/$id?wait=60")
  [ "$(jq -r .status <<<"$state")" != pending ] && break
done
jq . <<<"$state"
