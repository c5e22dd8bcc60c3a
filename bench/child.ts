import type { LibraryId } from './adapters/index.js';
import { scenarioById } from './scenarios/index.js';
import { reportAndExit } from './support/ipc.js';

/** One measurement in a fresh process: argv[2] is the job, the figures go back over IPC. */
export interface ChildJob {
  scenario: string;
  library: LibraryId;
  urls: string[];
  storeUrl?: string;
  params: unknown;
}

const job = JSON.parse(process.argv[2]!) as ChildJob;
const figures = await scenarioById(job.scenario).run({ library: job.library, urls: job.urls, storeUrl: job.storeUrl, params: job.params });
reportAndExit(figures);
