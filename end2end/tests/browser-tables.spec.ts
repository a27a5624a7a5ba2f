import { readFileSync } from 'node:fs';
import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

/** pandas is not among the Browser sandbox's packages (its wheels are built
 * for Pyodide alone, and are not vendored): the program makes a stand-in
 * module `pandas` with what the worker reads of a frame (its shape, labels
 * and values, read as the jail's kernel reads them) and a text as print
 * writes it. The worker's rules are tested with real pandas in
 * crates/runcell-sandbox/src/browser/tests.rs. */
const STAND_IN = `import sys, types

class Values:
    def __init__(self, values):
        self._values = list(values)

class Labels(list):
    nlevels = 1
    names = [None]
    def get_level_values(self, level):
        return Values(self)

class Columns:
    def __init__(self, frame):
        self.frame = frame
    def __getitem__(self, key):
        return Values(self.frame.data[self.frame.columns[key[1]]])

class DataFrame:
    def __init__(self, data, index):
        self.data, self.columns, self.index = data, Labels(data), Labels(index)
        self.iloc, self.shape = Columns(self), (len(index), len(data))
    def __len__(self):
        return self.shape[0]
    def head(self, n):
        return self
    def __str__(self):
        rows = [[""] + self.columns]
        rows += [[str(i)] + [str(self.data[c][r]) for c in self.columns] for r, i in enumerate(self.index)]
        widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
        return "\\n".join("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows)

pandas = types.ModuleType("pandas")
pandas.DataFrame, pandas.Series = DataFrame, type("Series", (), {})
sys.modules["pandas"] = pandas
df = DataFrame({"region": ["south", "east", "north"], "units": [30, 20, 10]}, index=[1, 2, 0])`;

/** The frame as print writes it. */
const PRINTED = '   region  units\n1   south     30\n2    east     20\n0   north     10';

test.describe('tables in the Browser sandbox on a desktop', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, "Python in the page needs the page's scripts");
  test.use({ viewport: { width: 1280, height: 800 } });
  // Pyodide loads in a few seconds; more on a busy machine.
  test.setTimeout(180_000);

  test("a frame printed alone is the page's table; printed beside another value it stays text", async ({
    page,
    context,
  }) => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();

    await notebook.ask(fenced(`${STAND_IN}\nprint("Top regions:")\nprint(df)`));
    const result = notebook.resultCells.nth(0);
    const table = result.getByRole('table');
    await expect(table).toBeVisible({ timeout: 60_000 });
    await notebook.waitTurnEnd();
    await expect(result.locator('iframe')).toHaveCount(0);
    await expect(table.getByRole('columnheader')).toHaveText(['index', 'region', 'units']);
    await expect(table.getByRole('rowheader')).toHaveText(['1', '2', '0']);
    await expect(table.locator('tbody tr').first().getByRole('cell')).toHaveText(['south', '30']);
    await expect(result.locator('.table-size')).toHaveText('3 rows × 2 columns');
    // What was printed before comes first; the frame's text is not printed
    // beside its table.
    await expect(result.locator('.out-stdout')).toHaveText('Top regions:\n');
    const text = (await result.textContent()) ?? '';
    expect(text.indexOf('Top regions:')).toBeGreaterThanOrEqual(0);
    expect(text.indexOf('Top regions:')).toBeLessThan(text.indexOf('south'));
    await expect(result.locator('pre').filter({ hasText: 'south' })).toHaveCount(0);

    // The page's own table: it sorts, copies and downloads as CSV.
    const units = table.getByRole('columnheader', { name: 'units' });
    await units.getByRole('button').click();
    await expect(units).toHaveAttribute('aria-sort', 'ascending');
    await expect
      .poll(() => table.locator('tbody tr td:nth-of-type(1)').allTextContents())
      .toEqual(['north', 'east', 'south']);
    const [saved] = await Promise.all([
      page.waitForEvent('download'),
      result.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    expect(readFileSync((await saved.path()) ?? '', 'utf8')).toBe(
      ',region,units\r\n0,north,10\r\n2,east,20\r\n1,south,30\r\n',
    );
    await result.getByRole('button', { name: 'Copy table' }).click();
    await expect(result.getByRole('button', { name: 'Copied' })).toBeVisible();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(
      '\tregion\tunits\n0\tnorth\t10\n2\teast\t20\n1\tsouth\t30',
    );

    // Printed beside another value, or to stderr, a frame is print's text.
    await notebook.ask(fenced('print("rows:", df)\nprint(df, file=sys.stderr)'));
    const mixed = notebook.resultCells.nth(1);
    await expect(mixed.locator('.out-stdout')).toHaveText(`rows: ${PRINTED}\n`);
    await expect(mixed.locator('.out-stderr')).toHaveText(`${PRINTED}\n`);
    await notebook.waitTurnEnd();
    await expect(mixed.getByRole('table')).toHaveCount(0);
  });
});
