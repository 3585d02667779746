// Unpacks the Chromium of the npm package @sparticuz/chromium into $TMPDIR
// (the package unpacks into os.tmpdir()) and prints the binary's path.
// Run by e2e/browser_test.go when the machine has no Chromium of its own.
import packaged from "@sparticuz/chromium";

console.log(await packaged.executablePath());
