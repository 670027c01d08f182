import { CliError, EXIT } from '../errors.js';
import { type Command, print } from './command.js';

/**
 * One-time migrations of the lease table, run by an operator after `cdk deploy`. `node-index`: node items
 * written before the node index get its key, so the paced pool sweep and reconciler see them (docs/DEPLOY.md,
 * "Upgrading to the node index"). Safe to re-run: an item that has the key is left alone.
 */
export const migrateCommand: Command = {
  name: 'migrate',
  usage: 'vpc-lease migrate node-index',
  summary: 'one-time table migrations after an upgrade (node-index: backfill the node index key)',
  options: [],
  positionals: [1, 1],
  async run(input) {
    const what = input.line.positionals[0];
    if (what !== 'node-index')
      throw new CliError(`migrate: unknown migration ${JSON.stringify(what)} (known: node-index)`, EXIT.usage);
    const ctx = input.ctx();
    const report = await ctx.backfillNodeIndex();
    print(input, report, () => [
      `${report.updated} node items given the node index key, ${report.alreadyIndexed} had it already (table ${ctx.tableName})`,
    ]);
    return EXIT.ok;
  },
};
