exports.main = () => 'app';
exports.check = () => exports.main() === 'app';
