// The shapes native OpenCode gives its objects and events: which keys each
// has (dotted for nested objects), which it may have, and which hold maps
// of anything. Written from the captures of native OpenCode 1.1.49 that
// upstream compared the reference against (its COMPARISON.md and
// snapshots/native), widened by @opencode-ai/sdk's types up to 1.19 where
// newer OpenCode adds keys (events' sessionID). diffShape names every way
// a value differs: "<kind>: missing <key>" or "<kind>: extra <key>".
const specs = {
  session: {
    required: ["id", "slug", "version", "projectID", "directory", "title", "time.created", "time.updated"],
    optional: ["parentID", "summary.additions", "summary.deletions", "summary.files", "summary.diffs", "share.url", "revert", "workspaceID", "time.compacting", "time.archived"],
    opaque: ["permission", "revert"],
  },
  userMessage: {
    required: ["id", "sessionID", "role", "time.created", "agent", "model.providerID", "model.modelID"],
    optional: ["summary.title", "summary.body", "summary.diffs", "format", "system", "variant"],
    opaque: ["tools", "format"],
  },
  assistantMessage: {
    required: ["id", "sessionID", "role", "time.created", "parentID", "modelID", "providerID", "mode", "agent", "path.cwd", "path.root", "cost",
      "tokens.input", "tokens.output", "tokens.reasoning", "tokens.cache.read", "tokens.cache.write"],
    optional: ["time.completed", "finish", "summary", "structured", "variant", "tokens.total"],
    opaque: ["error"],
  },
  "part:text": {
    required: ["id", "sessionID", "messageID", "type", "text"],
    optional: ["time.start", "time.end", "synthetic", "ignored"],
    opaque: ["metadata"],
  },
  "part:reasoning": {
    required: ["id", "sessionID", "messageID", "type", "text", "time.start"],
    optional: ["time.end"],
    opaque: ["metadata"],
  },
  "part:file": {
    required: ["id", "sessionID", "messageID", "type", "mime", "url"],
    optional: ["filename"],
    opaque: ["source"],
  },
  "part:step-start": { required: ["id", "sessionID", "messageID", "type"], optional: ["snapshot"] },
  "part:step-finish": {
    required: ["id", "sessionID", "messageID", "type", "reason", "cost", "tokens.input", "tokens.output", "tokens.reasoning", "tokens.cache.read", "tokens.cache.write"],
    optional: ["snapshot", "tokens.total"],
  },
  "part:tool": {
    required: ["id", "sessionID", "messageID", "type", "callID", "tool", "state.status", "state.input"],
    optional: ["state.raw", "state.output", "state.title", "state.error", "state.time.start", "state.time.end", "state.time.compacted"],
    opaque: ["state.input", "state.metadata", "metadata", "state.attachments"],
    // What each state must carry (the SDK's ToolState union).
    byStatus: {
      pending: ["state.raw"],
      running: ["state.time.start"],
      completed: ["state.output", "state.title", "state.metadata", "state.time.start", "state.time.end"],
      error: ["state.error", "state.time.start", "state.time.end"],
    },
  },
  "event:message.updated": { required: ["info"], optional: ["sessionID"], opaque: ["info"] },
  "event:message.part.updated": { required: ["part"], optional: ["delta", "sessionID", "time"], opaque: ["part"] },
  "event:message.part.delta": { required: ["sessionID", "messageID", "partID", "field", "delta"] },
  "event:session.created": { required: ["info"], optional: ["sessionID"], opaque: ["info"] },
  "event:session.updated": { required: ["info"], optional: ["sessionID"], opaque: ["info"] },
  "event:session.status": { required: ["sessionID", "status.type"], optional: ["status.attempt", "status.message", "status.next"] },
  "event:session.idle": { required: ["sessionID"] },
  "event:session.diff": { required: ["sessionID", "diff"], opaque: ["diff"] },
  "event:session.error": { optional: ["sessionID"], opaque: ["error"] },
  "event:todo.updated": { required: ["sessionID", "todos"], opaque: ["todos"] },
  "event:permission.asked": { required: ["id", "sessionID", "permission", "patterns", "metadata", "always"], optional: ["tool.messageID", "tool.callID"], opaque: ["metadata"] },
  "event:permission.updated": { required: ["id", "type", "sessionID", "messageID", "title", "metadata", "time.created"], optional: ["pattern", "callID"], opaque: ["metadata", "pattern"] },
  "event:permission.replied": { required: ["sessionID"], optional: ["requestID", "reply", "permissionID", "response"] },
  "event:question.asked": { required: ["id", "sessionID", "questions"], optional: ["tool.messageID", "tool.callID"], opaque: ["questions"] },
  model: {
    required: ["id", "providerID", "api.id", "api.url", "api.npm", "name", "capabilities.temperature", "capabilities.reasoning", "capabilities.attachment",
      "capabilities.toolcall", "capabilities.input", "capabilities.output", "cost.input", "cost.output", "cost.cache.read", "cost.cache.write",
      "limit.context", "limit.output", "status", "options", "headers", "release_date"],
    optional: ["family", "variants", "limit.input", "capabilities.interleaved", "cost.experimentalOver200K"],
    opaque: ["options", "headers", "variants", "capabilities.input", "capabilities.output", "capabilities.interleaved", "cost.experimentalOver200K",
      // models.dev fields GET /provider carried up to 1.2
      "attachment", "reasoning", "temperature", "tool_call"],
  },
};

// keys lists the dotted keys of v, stopping at opaque ones and at arrays.
function keys(v, opaque, prefix = "") {
  const out = [];
  for (const [k, x] of Object.entries(v ?? {})) {
    const key = prefix + k;
    out.push(key);
    if (x && typeof x === "object" && !Array.isArray(x) && !opaque.includes(key)) out.push(...keys(x, opaque, key + "."));
  }
  return out;
}

export function diffShape(kind, value) {
  const spec = specs[kind];
  if (!spec) return [];
  const opaque = spec.opaque ?? [];
  const have = keys(value, opaque);
  const required = [...(spec.required ?? []), ...(spec.byStatus?.[value?.state?.status] ?? [])];
  const allowed = new Set([...required, ...(spec.optional ?? []), ...opaque]);
  // A nested key is allowed where its parent is (time.start for time).
  for (const k of [...allowed]) {
    const parts = k.split(".");
    for (let i = 1; i < parts.length; i++) allowed.add(parts.slice(0, i).join("."));
  }
  const out = [];
  for (const k of required) if (!have.includes(k)) out.push(`${kind}: missing ${k}`);
  for (const k of have) if (!allowed.has(k) && !opaque.some((o) => k.startsWith(o + "."))) out.push(`${kind}: extra ${k}`);
  return out;
}
