const greet = (who) => `hello, ${who}`;
module.exports.greet = greet;
module.exports.check = () => greet('vx') === 'hello, vx';
