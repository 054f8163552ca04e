exports.add = (a, b) => a + b;
exports.check = () => exports.add(2, 3) === 5;
