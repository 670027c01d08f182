import { formatValue, type Labels, type MetricFamily } from './registry.js';

/** The content type of the text exposition format this module writes. */
export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** HELP text escapes only backslash and newline; label values also escape the double quote. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatLabels(labels: Labels): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

/**
 * Prometheus text format 0.0.4: per family one HELP and one TYPE line, then its samples. A family with no series
 * still gets its HELP and TYPE, so scrapers and tests see every name the process exports.
 */
export function renderExposition(families: readonly MetricFamily[]): string {
  const lines: string[] = [];
  for (const family of families) {
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples())
      lines.push(`${sample.name}${formatLabels(sample.labels)} ${formatValue(sample.value)}`);
  }
  return `${lines.join('\n')}\n`;
}
