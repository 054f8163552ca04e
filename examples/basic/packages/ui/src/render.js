const render = (name) => `<h1>${name}</h1>`;
module.exports.render = render;
module.exports.check = () => render('x') === '<h1>x</h1>';
