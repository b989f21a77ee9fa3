// kubectl agentrun ui: the one script of its pages (docs/ui.md). The
// server renders each page's frame; this script fills it from the
// server's event streams, placing every value as text.
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { spendPage } from './spend.js';

const pages = { runs: runsPage, run: runPage, spend: spendPage };
const start = pages[document.body.dataset.page];
if (start) start();
