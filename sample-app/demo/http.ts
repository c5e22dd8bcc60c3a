/** One HTTP answer as the demo sees it; status 0 when the request got no answer at all. */
export interface Answer<T = unknown> {
  status: number;
  body: T;
  /** The X-Lock-Wait-Ms header: how long the request waited before its handler ran. */
  lockWaitMs: number | undefined;
}

export async function call<T = unknown>(method: string, url: string, body?: unknown): Promise<Answer<T>> {
  try {
    const response = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    const wait = response.headers.get('x-lock-wait-ms');
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T, lockWaitMs: wait === null ? undefined : Number(wait) };
  } catch (error) {
    return { status: 0, body: { error: String(error) } as T, lockWaitMs: undefined };
  }
}

/** Like call(), for set-up requests that must succeed. */
export async function expectOk<T = unknown>(method: string, url: string, body?: unknown): Promise<T> {
  const answer = await call<T>(method, url, body);
  if (answer.status < 200 || answer.status > 299) {
    throw new Error(`${method} ${url} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  }
  return answer.body;
}

/** Counts per status code, e.g. { 201: 10, 422: 10 }. */
export function statusCounts(answers: readonly Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}
