// `@vx-build/vx/config` for a config written as code: helpers that exist only for typing (the
// npm package ships their types beside them). vx's loader resolves the name to this file when the
// workspace has no such package installed, so a config imports them either way.
export const defineProject = (config) => config;
export const defineWorkspace = (config) => config;
export const definePlugin = (plugin) => plugin;
