const routes = ['/', '/about'];
module.exports.routes = routes;
