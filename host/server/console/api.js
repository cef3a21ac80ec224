// The console's only ways to the gateway: the public A2A endpoint (/a2a),
// public HTTP APIs (/v1/models, /v1/chat/completions) and sign-in (/auth/…). Calls are
// authenticated by the HttpOnly session cookie plus the session's CSRF token
// in X-CSRF-Token; no API key is kept in the page.

let csrf = null;

export class ApiError extends Error {
  constructor(message, { status = 0, reason = '', code = '' } = {}) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.code = code;
  }
}

async function http(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  if (csrf) headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  if (response.status !== 204) {
    try { data = await response.json(); } catch { data = null; }
  }
  if (!response.ok) {
    const error = data && data.error;
    const message = (error && error.message) || `${method} ${path}: HTTP ${response.status}`;
    throw new ApiError(message, { status: response.status, code: error && error.code });
  }
  return data;
}

/** The signed-in session, or null. Remembers its CSRF token. */
export async function session() {
  const info = await http('GET', '/auth/session');
  csrf = info.signed_in ? info.csrf_token : null;
  return info.signed_in ? info : null;
}

export async function signInWithKey(apiKey) {
  const created = await http('POST', '/auth/session', { api_key: apiKey });
  csrf = created.csrf_token;
  return created;
}

export async function signOut() {
  await http('DELETE', '/auth/session');
  csrf = null;
}

export function providers() {
  return http('GET', '/auth/providers');
}

let nextId = 1;

/** One control-plane op through its A2A extension method (`keys/create`). */
export async function op(name, params = {}) {
  const method = name.replace('.', '/');
  const headers = { 'Content-Type': 'application/json', 'A2A-Version': '1.0' };
  if (csrf) headers['X-CSRF-Token'] = csrf;
  const response = await fetch('/a2a', {
    method: 'POST',
    headers,
    credentials: 'same-origin',
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  const error = data && data.error;
  if (!response.ok || error) {
    const info = (error && error.data && error.data.find && error.data.find((d) => d.reason)) || {};
    throw new ApiError((error && error.message) || `HTTP ${response.status}`, {
      status: response.status,
      reason: info.reason || '',
    });
  }
  return data.result;
}

/** GET on a public HTTP API (the model catalog). */
export function get(path) {
  return http('GET', path);
}

/**
 * A streamed chat completion (`POST /v1/chat/completions` with `stream:
 * true`), authenticated like every call here by the session cookie and its
 * CSRF token. `onChunk(chunk)` gets each SSE data object as it arrives.
 * Resolves with the request id (the `X-Request-Id` header) once the stream
 * ends; a refusal or an error event mid-stream rejects with an ApiError.
 */
export async function chatStream(body, onChunk) {
  const headers = { 'Content-Type': 'application/json', 'Accept': 'text/event-stream' };
  if (csrf) headers['X-CSRF-Token'] = csrf;
  const response = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers,
    credentials: 'same-origin',
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  const requestId = response.headers.get('X-Request-Id') || '';
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    const error = data && data.error;
    throw new ApiError((error && error.message) || `HTTP ${response.status}`, {
      status: response.status, code: error && error.code,
    });
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    // SSE events end with a blank line; a read may hold part of one.
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split('\n').filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, '')).join('\n');
      if (!data) continue;
      if (data === '[DONE]') return requestId;
      const chunk = JSON.parse(data);
      if (chunk.error) {
        throw new ApiError(chunk.error.message || 'The stream failed.', { code: chunk.error.code });
      }
      onChunk(chunk);
    }
  }
  return requestId;
}
