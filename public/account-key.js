// The new-key page's Copy button (served from /account-key.js under the
// page's own policy: scripts from this site, none inline). Without
// JavaScript the button stays hidden and the key is selectable text.
// The button names the element to copy in `data-copies`; what happened is
// said in the live region the page names in `data-says`.
'use strict';

(() => {
  for (const button of document.querySelectorAll('button[data-copies]')) {
    const source = document.getElementById(button.dataset.copies);
    const said = document.getElementById(button.dataset.says);
    if (!source || !said) continue;
    // Before the region's own words, with a space between.
    const say = (text) => {
      said.textContent = `${text} `;
    };
    button.hidden = false;
    button.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(source.textContent.trim());
        say('Copied.');
      } catch {
        // No clipboard here (an insecure origin, a refused permission):
        // the key is selected so that the person can copy it themselves.
        const range = document.createRange();
        range.selectNodeContents(source);
        const selection = getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        say('Not copied: the key is selected, copy it with your keyboard.');
      }
    });
  }
})();
