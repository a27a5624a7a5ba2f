import { readFileSync } from 'node:fs';
import type { Page } from '@playwright/test';

/** axe-core, the accessibility auditor, injected into each page it checks. */
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** A violation as a failing test prints it. */
export interface Problem {
  rule: string;
  impact: string;
  where: string[];
}

/** The serious and critical problems axe-core finds in the page as it is.
 * `iframes: false` leaves out frames the page does not own (an output
 * frame holds a program's markup, sandboxed without scripts). */
export async function problems(page: Page, { iframes = true } = {}): Promise<Problem[]> {
  // Evaluated by the test's own channel, as a script tag would be refused
  // on pages whose policy runs no script (`script-src 'none'`: the API
  // reference, a share link's figures).
  await page.evaluate(AXE);
  return page.evaluate(async (iframes) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const axe = (window as any).axe;
    const result = await axe.run(document, { resultTypes: ['violations'], iframes });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return result.violations
      .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => ({
        rule: v.id,
        impact: v.impact,
        where: v.nodes.slice(0, 5).map((n: any) => `${n.target.join(' ')}: ${n.failureSummary ?? ''}`),
      }));
  }, iframes);
}
