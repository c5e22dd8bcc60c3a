/**
 * What `request` settles with, or, when `timeoutMs` pass first, what `late()` returns (or throws).
 * The timer is cleared either way: nothing keeps the process waiting on it after the answer.
 */
export async function within<T, U>(request: Promise<T>, timeoutMs: number, late: () => U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<U>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(late());
      } catch (error) {
        reject(error);
      }
    }, timeoutMs);
  });
  try {
    return await Promise.race([request, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
