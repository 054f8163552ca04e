// Loaded (NODE_OPTIONS=--require) into the bench's `nx-daemon` runs where /.dockerenv exists:
// Nx 18 and 19 never start their daemon in a Docker container, whatever NX_DAEMON says (their
// daemon client's isDocker(), read in 18.0.5-19.0.4; Nx 21 starts it when NX_DAEMON=true), so
// "daemon on" would time Nx without it. This hides that one file from Nx's stat and nothing
// else.
const fs = require('fs');
const statSync = fs.statSync;
fs.statSync = function (path, ...rest) {
  if (path === '/.dockerenv') {
    const error = new Error("ENOENT: no such file or directory, stat '/.dockerenv'");
    error.code = 'ENOENT';
    throw error;
  }
  return statSync.call(this, path, ...rest);
};
