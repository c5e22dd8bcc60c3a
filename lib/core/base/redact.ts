/**
 * Strips credentials from anything URL-shaped, so none reaches an error or a log: the
 * `user:password@` of a URL, and any `password=` (or `username=`) in a query, which ioredis
 * also reads credentials from (`redis://h:p?password=X`, with or without the scheme).
 */
export function redactCredentials(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^@/\s]*@/gi, '$1').replace(/([?&](?:[a-z]*pass(?:word)?|[a-z]*user(?:name)?)=)[^&#\s]*/gi, '$1***');
}

/** `host:port`, an IPv6 host in brackets: how a master, a Sentinel or a Cluster node is named. */
export function endpointName(host: string, port: number | string): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}
