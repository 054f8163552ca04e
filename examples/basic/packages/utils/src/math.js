const add = (a, b) => a + b;
module.exports.add = add;
module.exports.check = () => add(2, 3) === 5;
