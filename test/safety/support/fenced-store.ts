import { now, type History } from './history.js';

/**
 * The resource the locks protect: it lives in the test's own process and every worker process
 * reaches it over its IPC channel, so all of them share one store with one order of operations.
 *
 * Per resource it keeps two counters that workers read-modify-write under the lock:
 * - `value`, fenced: every read and write carries the holder's fencing token, and the store turns
 *   away a token lower than the highest it has seen (or equal to it from another holder). A read
 *   raises the mark too, so a paused holder's late write is refused as soon as the next holder
 *   has merely looked.
 * - `plain`, not fenced: written as asked, like a resource that knows nothing of tokens. Only the
 *   lock protects it, so a lost update there is a lock failure the fence did not hide.
 *
 * Every operation is recorded in the history, with its position in the store's order (`seq`).
 */
export interface StoreRequest {
  readonly op: 'read' | 'write';
  readonly resource: string;
  /** Absent for an unfenced lock: the fenced counter is neither read nor written, the plain one is. */
  readonly fence?: number;
  readonly token: string;
  readonly proc: string;
  readonly worker: number;
  /** write: the new fenced value. */
  readonly value?: number;
  /** write: the new unfenced value; absent when the writer no longer trusted its lock. */
  readonly plain?: number;
}

export interface StoreReply {
  readonly accepted: boolean;
  readonly seq: number;
  readonly value: number;
  readonly plain: number;
  /** The highest fence the store had seen before this operation. */
  readonly highestFence: number;
}

interface Cell {
  value: number;
  plain: number;
  highestFence: number;
  highestToken: string | undefined;
}

export class FencedStore {
  readonly #cells = new Map<string, Cell>();
  #seq = 0;

  constructor(private readonly history: History) {}

  apply(request: StoreRequest): StoreReply {
    const cell = this.#cell(request.resource);
    const highestFence = cell.highestFence;
    const fenced = request.fence !== undefined;
    const accepted =
      !fenced || request.fence! > cell.highestFence || (request.fence === cell.highestFence && request.token === cell.highestToken);
    if (accepted && fenced) {
      cell.highestFence = request.fence;
      cell.highestToken = request.token;
    }
    if (request.op === 'write') {
      if (accepted && fenced) cell.value = request.value!;
      if (request.plain !== undefined) cell.plain = request.plain;
    }
    const seq = ++this.#seq;
    this.history.record({
      proc: 'store',
      worker: 0,
      op: request.op === 'read' ? 'store-read' : 'store-write',
      phase: accepted ? 'ok' : 'fail',
      t: now(),
      resource: request.resource,
      token: request.token,
      fence: request.fence,
      seq,
      accepted,
      value: request.op === 'write' && fenced ? request.value : cell.value,
      ...(request.op === 'write' ? (request.plain !== undefined ? { plain: request.plain } : {}) : { plain: cell.plain }),
      note: `${request.proc}/${request.worker}`,
    });
    return { accepted, seq, value: cell.value, plain: cell.plain, highestFence };
  }

  /** Records the final state of every resource, for the lost-update check. */
  recordFinal(): void {
    for (const [resource, cell] of this.#cells) {
      this.history.record({ proc: 'store', worker: 0, op: 'final', phase: 'ok', t: now(), resource, value: cell.value, plain: cell.plain });
    }
  }

  peek(resource: string): Readonly<Cell> {
    return { ...this.#cell(resource) };
  }

  #cell(resource: string): Cell {
    let cell = this.#cells.get(resource);
    if (!cell) this.#cells.set(resource, (cell = { value: 0, plain: 0, highestFence: Number.NEGATIVE_INFINITY, highestToken: undefined }));
    return cell;
  }
}
