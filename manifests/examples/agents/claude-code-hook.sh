#!/usr/bin/env bash
# A Claude Code PreToolUse hook: ask Pizza Bot before the tool runs and wait for a person.
# Approved: allow (an edit's arguments replace the tool's input); rejected or expired: deny,
# with the reason Claude reads; Pizza Bot unreachable: block the call (exit 2).
# Needs jq and pizzabot on PATH; PIZZABOT_URL / PIZZABOT_API_TOKEN as for `pizzabot`.
set -uo pipefail
input=$(cat)
tool=$(jq -r '.tool_name' <<<"$input")
args=$(jq -c '.tool_input // {}' <<<"$input")
title="Claude Code: $(jq -r '(.tool_input.command // .tool_input.file_path // .tool_name) | .[0:150]' <<<"$input")"

# A shell command gets an edit form on the cards (other tools: approve or reject).
schema=()
[ "$tool" = Bash ] && schema=(--schema "$(dirname "$0")/bash-schema.json")

decision=$(pizzabot ask "${PIZZABOT_HOOK_SKILL:-agents}" --tool "$tool" --args "$args" \
  --title "$title" "${schema[@]}" --wait --timeout "${PIZZABOT_HOOK_TIMEOUT:-3000}")
case $? in
  0) jq -c '{hookSpecificOutput: ({hookEventName: "PreToolUse", permissionDecision: "allow",
        permissionDecisionReason: "Approved by \(.decided_by // "a person") via \(.via // "Pizza Bot")"}
        + (if .status == "edited" then {updatedInput: .args} else {} end))}' <<<"$decision" ;;
  1|3) jq -c '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny",
        permissionDecisionReason: (if .status == "rejected"
          then "Rejected by \(.decided_by // "a person"): \(.reason // "no reason given")"
          else "No one approved this in time; do not retry it unless asked." end)}}' <<<"$decision" ;;
  *) echo "Pizza Bot could not be asked, so the call is blocked." >&2; exit 2 ;;
esac
